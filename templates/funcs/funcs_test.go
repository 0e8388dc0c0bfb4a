package funcs

import (
	"bytes"
	"strings"
	"testing"
	"text/template"
)

// run executes text with data through the function map.
func run(t *testing.T, text string, data any) (string, error) {
	t.Helper()
	tmpl, err := template.New("t").Option("missingkey=error").Funcs(Hermetic()).Parse(text)
	if err != nil {
		t.Fatalf("parse %q: %v", text, err)
	}
	var b bytes.Buffer
	err = tmpl.Execute(&b, data)
	return b.String(), err
}

func TestFuncs(t *testing.T) {
	data := map[string]any{
		"Spec": map[string]any{
			"replicas": int64(3), "ratio": 2.5, "zero": int64(0), "empty": "", "name": "My_App.Example",
			"tags": []any{"a", "b"}, "nested": map[string]any{"k": "v"}, "whole": 4.0, "str": "42",
		},
		"Labels": map[string]string{"tier": "web"},
	}
	tests := []struct{ text, want string }{
		{`{{ get .Spec "replicas" 1 }}`, "3"},
		{`{{ get .Spec "missing" 1 }}`, "1"},
		{`{{ get .Labels "tier" "x" }}`, "web"},
		{`{{ get .Labels "nope" "x" }}`, "x"},
		{`{{ get nil "a" "d" }}`, "d"},
		{`{{ default 5 .Spec.zero }}`, "5"},
		{`{{ default "x" .Spec.empty }}`, "x"},
		{`{{ default 5 .Spec.replicas }}`, "3"},
		{`{{ required "need it" .Spec.replicas }}`, "3"},
		{`{{ empty .Spec.zero }} {{ empty .Spec.tags }} {{ empty (list) }}`, "true false true"},
		{`{{ coalesce .Spec.empty .Spec.zero "c" }}`, "c"},
		{`{{ hasKey .Spec "ratio" }} {{ hasKey .Spec "nope" }} {{ hasKey .Labels "tier" }}`, "true false true"},
		{`{{ quote "a\"b<c>" }} {{ quote 8080 }} {{ quote nil }}`, `"a\"b<c>" "8080" `},
		{`{{ squote "it" }}`, `'it'`},
		{`{{ toYaml .Spec.nested }}`, "k: v"},
		{`{{ toYaml .Spec.tags }}`, "- a\n- b"},
		{`{{ toJson .Spec.nested }} {{ toJson "<&>" }}`, `{"k":"v"} "<&>"`},
		{`{{ indent 2 "a\nb" }}`, "  a\n  b"},
		{`x:{{ nindent 2 "a" }}`, "x:\n  a"},
		{`{{ lower "AbC" }}{{ upper "x" }}{{ trim "  y  " }}`, "abcXy"},
		{`{{ trimPrefix "v" "v1.2" }} {{ trimSuffix ".tmpl" "a.tmpl" }}`, "1.2 a"},
		{`{{ trunc 3 "abcdef" }} {{ trunc -2 "abcdef" }} {{ trunc 10 "ab" }}`, "abc ef ab"},
		{`{{ dnsLabel .Spec.name }}`, "my-app-example"},
		{`{{ dnsLabel "--Hello__World--" }}`, "hello-world"},
		{`{{ replace "." "-" "a.b.c" }}`, "a-b-c"},
		{`{{ contains "b" "abc" }} {{ hasPrefix "a" "abc" }} {{ hasSuffix "x" "abc" }}`, "true true false"},
		{`{{ join "," .Spec.tags }} {{ join "-" (list 1 2.5 "x") }}`, "a,b 1-2.5-x"},
		{`{{ $d := dict "a" 1 "b" "two" }}{{ $d.a }}{{ $d.b }}`, "1two"},
		{`{{ toString .Spec.ratio }} {{ toString .Spec.replicas }}`, "2.5 3"},
		{`{{ int64 .Spec.whole }} {{ int64 .Spec.str }} {{ int64 7 }} {{ int64 .Spec.ratio }}`, "4 42 7 2"},
		{`{{ sha256sum "a" | trunc 8 }} {{ semverCompare ">=1.2" "1.3.0" }}`, "ca978112 true"},
		{`{{ float64 .Spec.replicas }} {{ float64 "1.5" }}`, "3 1.5"},
		{`{{ b64enc "hello" }}`, "aGVsbG8="},
		{`{{ printf "%s:%d" "a" (get .Spec "port" 8080 | int64) }}`, "a:8080"},
	}
	for _, tt := range tests {
		got, err := run(t, tt.text, data)
		if err != nil {
			t.Errorf("%s: %v", tt.text, err)
			continue
		}
		if got != tt.want {
			t.Errorf("%s = %q, want %q", tt.text, got, tt.want)
		}
	}
}

func TestFuncErrors(t *testing.T) {
	data := map[string]any{"Spec": map[string]any{"empty": "", "ratio": 2.5, "obj": map[string]any{"a": "b"}}}
	tests := []struct{ text, want string }{
		{`{{ .Spec.missing }}`, `map has no entry for key "missing"`},
		{`{{ required "spec.image is required" .Spec.empty }}`, "spec.image is required"},
		{`{{ required "need x" nil }}`, "need x"},
		{`{{ dnsLabel "___" }}`, "has no letters or digits"},
		{`{{ fail "stop here" }}`, "stop here"},
		{`{{ mustRegexMatch "[" "x" }}`, "missing closing ]"},
		{`{{ indent -1 "x" }}`, "negative Repeat count"},
	}
	for _, tt := range tests {
		_, err := run(t, tt.text, data)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: err = %v, want it to contain %q", tt.text, err, tt.want)
		}
	}
}

func TestDNSLabel(t *testing.T) {
	long := strings.Repeat("a", 62) + "-b"
	tests := []struct{ in, want string }{
		{"demo", "demo"},
		{"Demo.App", "demo-app"},
		{"a--b", "a-b"},
		{"-x-", "x"},
		{"ünïcode", "n-code"},
		{long, strings.Repeat("a", 62)}, // cut at 63, then the trailing '-' goes
		{strings.Repeat("x", 100), strings.Repeat("x", 63)},
		{"123", "123"},
	}
	for _, tt := range tests {
		got, err := dnsLabel(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("dnsLabel(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
}

// The function map must stay hermetic: no name that hints at env, files,
// time, randomness or network may creep in.
func TestFuncsHermetic(t *testing.T) {
	for name := range Hermetic() {
		for _, bad := range []string{"env", "file", "now", "date", "rand", "uuid", "http", "lookup", "exec", "glob"} {
			if strings.Contains(strings.ToLower(name), bad) {
				t.Errorf("function %q looks non-hermetic", name)
			}
		}
	}
}
