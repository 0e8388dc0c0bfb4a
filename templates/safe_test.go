package templates

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"stencil.dev/stencil/config"
	"stencil.dev/stencil/contract"
	"stencil.dev/stencil/templates/engine"
	"stencil.dev/stencil/templates/view"
)

// hostileTemplate prints .Spec.s in every position a chart-style template
// (values not quoted) puts a value, and .Spec.m (a map holding s as key and
// value) where structure is printed on purpose. wantHostile says what each
// field must hold.
const hostileTemplate = `apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Name }}
  labels:
    {{- include "labels" . | nindent 4 }}
  annotations:
    # a comment: {{ .Spec.s }}
    plain: {{ .Spec.s }}
    affixed: pre-{{ .Spec.s }}-post
    double: "{{ .Spec.s }}"
    double-affixed: "a\t{{ .Spec.s }}\"b"
    single: '{{ .Spec.s }}'
    single-affixed: 'it''s {{ .Spec.s }}'
    quoted: {{ quote .Spec.s }}
    squoted: {{ .Spec.s | squote }}
    nindented:{{ .Spec.s | nindent 6 }}
    included: {{ include "value" . }}
    includedAffixed: x-{{ include "value" . }}
    sum: {{ .Spec.s | sha256sum }}
    twice: {{ .Spec.s }}{{ .Spec.s }} # {{ .Spec.s }}
data:
  flowMap: {a: {{ .Spec.s }}, b: '{{ .Spec.s }}', c: 1}
  flowList: [{{ .Spec.s }}, "{{ .Spec.s }}", z]
  literal: |
{{ .Spec.s | indent 4 }}
  stripped: |-
    {{ .Spec.s }}
  kept: |+
    {{ .Spec.s }}

  folded: >
    {{ .Spec.s }}
  afterBlocks: end
  list:
    - {{ .Spec.s }}
    - x{{ .Spec.s }}
  keys:
    {{ .Spec.s }}: key
  yaml:
    {{- toYaml .Spec.m | nindent 4 }}
  json: {{ toJson .Spec.m }}
  jsonText: '{{ toJson .Spec.m }}'
  yamlList: {{- toYaml .Spec.l | nindent 4 }}
---
# {{ .Spec.s }}
`

const hostileHelpers = `{{- define "labels" -}}
app: {{ .Name }}
tier: web
{{- end }}
{{- define "value" -}}
{{ .Spec.s }}
{{- end }}`

// wantHostile is what hostileTemplate renders for s: every field holds s
// exactly once, as text, where the template put it.
func wantHostile(s string) map[string]any {
	clip := strings.TrimRight(s, "\n") + "\n"
	m := map[string]any{s: s, "n": int64(1)}
	return map[string]any{
		"apiVersion": "v1",
		"kind":       "ConfigMap",
		"metadata": map[string]any{
			"name":      "demo",
			"namespace": "team-a",
			"labels":    map[string]any{"app": "demo", "tier": "web"},
			"annotations": map[string]any{
				"plain": s, "affixed": "pre-" + s + "-post",
				"double": s, "double-affixed": "a\t" + s + "\"b",
				"single": s, "single-affixed": "it's " + s,
				"quoted": s, "squoted": s, "nindented": s,
				"included": s, "includedAffixed": "x-" + s,
				"sum": fmt.Sprintf("%x", sha256Of(s)), "twice": s + s,
			},
		},
		"data": map[string]any{
			"flowMap":     map[string]any{"a": s, "b": s, "c": int64(1)},
			"flowList":    []any{s, s, "z"},
			"literal":     clip,
			"stripped":    strings.TrimRight(s, "\n"),
			"kept":        s + "\n\n",
			"folded":      clip,
			"afterBlocks": "end",
			"list":        []any{s, "x" + s},
			"keys":        map[string]any{s: "key"},
			"yaml":        m,
			"json":        m,
			"jsonText":    jsonText(m),
			"yamlList":    []any{s, int64(2), true, nil},
		},
	}
}

func sha256Of(s string) []byte {
	sum := sha256.Sum256([]byte(s))
	return sum[:]
}

// jsonText is v as toJson prints it (HTML left unescaped).
func jsonText(v any) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		panic(err)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

func hostileSet(t *testing.T) *Set {
	t.Helper()
	return loadSetWithHelpers(t, Options{AllowedKinds: []schema.GroupVersionKind{{Version: "v1", Kind: "ConfigMap"}}},
		"_helpers.tpl", hostileHelpers, "cm.yaml.tmpl", hostileTemplate)
}

// loadSetWithHelpers is loadSet with one helpers file (its first two
// arguments) in the entry.
func loadSetWithHelpers(t *testing.T, opts Options, helper, helperText string, files ...string) *Set {
	t.Helper()
	s, err := tryLoadSet(t, opts, append([]string{"helper:" + helper, helperText}, files...)...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func renderHostile(t *testing.T, set *Set, s string) (map[string]any, error) {
	t.Helper()
	p := parent()
	p.Spec = map[string]any{"s": s, "m": map[string]any{s: s, "n": int64(1)}, "l": []any{s, int64(2), true, nil}}
	children, err := set.Render(p)
	if err != nil {
		return nil, err
	}
	if len(children) != 1 {
		t.Fatalf("s=%q: %d children, want 1 (the second document holds only a comment)", s, len(children))
	}
	obj := children[0].Object
	unstructured.RemoveNestedField(obj, "metadata", "ownerReferences")
	labels := obj["metadata"].(map[string]any)["labels"].(map[string]any)
	delete(labels, contract.LabelManagedBy)
	delete(labels, contract.LabelOwnerUID)
	return obj, nil
}

// hostilePieces are what a tenant's string is made of: YAML's indicators,
// line breaks, quotes, escapes, document markers, the words YAML 1.1 reads
// as booleans and numbers, and text outside ASCII.
var hostilePieces = []string{
	"\n", "\n\n", "\r\n", "\t", " ", "  ", ": ", ":", "#", " #", "---", "...", "- ", "-", "? ",
	"&a", "*a", "!", "!!str", "[", "]", "{", "}", ",", "|", "|-", ">", "'", "''", "\"", "\\", "\\n", "%",
	"@", "`", "{{", "}}", "NO", "on", "yes", "~", "null", "1.20", "0755", "0x1F", "1e3", ".inf",
	"privileged: true", "\n  hostNetwork: true", "\n- name: evil", "\napiVersion: v1", "é", "日本", "🙂",
	"\u2028", "\u00a0", "\x00", "\x1b", "x", "web", "zzstencilv",
}

func hostileString(r *rand.Rand) string {
	var b strings.Builder
	for range 1 + r.IntN(8) {
		b.WriteString(hostilePieces[r.IntN(len(hostilePieces))])
	}
	return b.String()
}

// TestRenderHostileValues is the property: for any string a tenant puts in
// the spec, in every position, the child has exactly the fields of a
// benign render and each holds the string as text.
func TestRenderHostileValues(t *testing.T) {
	set := hostileSet(t)
	benign, err := renderHostile(t, set, "benign")
	if err != nil {
		t.Fatal(err)
	}
	if want := wantHostile("benign"); !reflect.DeepEqual(benign, want) {
		t.Fatalf("benign render:\n got %v\nwant %v", benign, want)
	}
	benignPaths := fieldPaths(benign, "benign")
	r := rand.New(rand.NewPCG(21, 1))
	inputs := slices.Clone(hostilePieces)
	inputs = append(inputs, "", "nginx, securityContext: {privileged: true}",
		"x\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: evil}", "it's \"#1\"", "a\n\n\n", "\n",
		strings.Repeat("\x12", 300), strings.Repeat("k: ", 700))
	for range 3000 {
		inputs = append(inputs, hostileString(r))
	}
	for _, s := range inputs {
		got, err := renderHostile(t, set, s)
		if err != nil && c1Control(s) && strings.Contains(err.Error(), "a field name cannot hold it") {
			continue // a key YAML cannot print is refused, naming it
		}
		if err != nil {
			t.Errorf("s=%q: %v", s, err)
			continue
		}
		if paths := fieldPaths(got, s); !slices.Equal(paths, benignPaths) {
			t.Errorf("s=%q: the child's shape changed:\n got %v\nwant %v", s, paths, benignPaths)
			continue
		}
		if want := wantHostile(s); !reflect.DeepEqual(got, want) {
			t.Errorf("s=%q: values differ:\n got %#v\nwant %#v", s, got, want)
		}
	}
}

// fieldPaths lists the paths to every leaf of v, with s (a key the tenant
// chose) written as <s>.
func fieldPaths(v any, s string) []string {
	var out []string
	var walk func(prefix string, v any)
	walk = func(prefix string, v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, e := range v {
				if k == s {
					k = "<s>"
				}
				walk(prefix+"."+k, e)
			}
		case []any:
			for i, e := range v {
				walk(fmt.Sprintf("%s[%d]", prefix, i), e)
			}
		default:
			out = append(out, prefix)
		}
	}
	walk("", v)
	slices.Sort(out)
	return out
}

// FuzzRenderHostileValues explores the same property with the fuzzer
// (go test -fuzz FuzzRenderHostileValues ./templates).
func FuzzRenderHostileValues(f *testing.F) {
	for _, s := range hostilePieces {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !utf8.ValidString(s) {
			return // the API server stores only UTF-8
		}
		set := hostileSet(&testing.T{})
		got, err := renderHostile(&testing.T{}, set, s)
		if err != nil && c1Control(s) && strings.Contains(err.Error(), "a field name cannot hold it") {
			return // a key YAML cannot print is refused, naming it
		}
		if err != nil {
			t.Fatalf("s=%q: %v", s, err)
		}
		if want := wantHostile(s); !reflect.DeepEqual(got, want) {
			t.Fatalf("s=%q:\n got %#v\nwant %#v", s, got, want)
		}
	})
}

// TestRenderValuesKeepTheirType: a string stays a string whatever it looks
// like, a number a number, a boolean a boolean; a value with literal text
// around it is a string.
func TestRenderValuesKeepTheirType(t *testing.T) {
	set := loadSet(t, Options{AllowedKinds: []schema.GroupVersionKind{{Version: "v1", Kind: "ConfigMap"}}}, "cm.tmpl", `apiVersion: v1
kind: ConfigMap
metadata: {name: {{ .Name }}-svc}
data:
  region: {{ .Spec.region }}
  version: {{ .Spec.version }}
  mode: {{ .Spec.mode }}
  octal: {{ .Spec.octal }}
  empty: {{ .Spec.empty }}
  tilde: {{ .Spec.tilde }}
  int: {{ .Spec.int }}
  float: {{ .Spec.float }}
  bool: {{ .Spec.bool }}
  nothing: {{ .Spec.null }}
  sum: {{ add .Spec.int 1 }}
  image: nginx:{{ .Spec.version }}
  literalNo: NO
  literalInt: 0755
`)
	p := parent()
	p.Spec = map[string]any{"region": "NO", "version": "1.20", "mode": "on", "octal": "0755", "empty": "", "tilde": "~",
		"int": int64(3), "float": 1.5, "bool": true, "null": nil}
	children, err := set.Render(p)
	if err != nil {
		t.Fatal(err)
	}
	got := children[0].Object["data"]
	want := map[string]any{"region": "NO", "version": "1.20", "mode": "on", "octal": "0755", "empty": "", "tilde": "~",
		"int": int64(3), "float": 1.5, "bool": true, "nothing": nil, "sum": int64(4), "image": "nginx:1.20",
		// What the author wrote literally is read as YAML always read it.
		"literalNo": false, "literalInt": int64(493)}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("data:\n got %#v\nwant %#v", got, want)
	}
	if name := children[0].GetName(); name != "demo-svc" {
		t.Errorf("name = %q, want demo-svc", name)
	}
}

func TestRenderStructureErrors(t *testing.T) {
	tests := []struct{ name, text, want string }{
		{"a map printed as a scalar", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\ndata:\n  a: {{ .Spec.m }}\n",
			"cm.tmpl:5: prints a mapping where one value stands; print structure with toYaml or toJson"},
		{"a list printed as a scalar", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\ndata:\n\n  a: x{{ .Spec.l }}\n",
			"cm.tmpl:6: prints a list where one value stands"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			set := loadSet(t, Options{AllowedKinds: []schema.GroupVersionKind{{Version: "v1", Kind: "ConfigMap"}}}, "cm.tmpl", tt.text)
			p := parent()
			p.Spec = map[string]any{"m": map[string]any{"a": "b"}, "l": []any{"a"}}
			_, err := set.Render(p)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tt.want)
			}
		})
	}
}

func TestLoadRefusesTplAndLookup(t *testing.T) {
	for _, tt := range []struct{ text, want string }{
		{"a: {{ tpl .Spec.t . }}", "t.tmpl:1: tpl is refused: it runs text from the custom resource as template code"},
		{"\n{{ if lookup \"v1\" \"Secret\" \"ns\" \"x\" }}{{ end }}", "t.tmpl:2: lookup is refused: templates are hermetic and never read the cluster"},
	} {
		_, err := tryLoadSet(t, Options{}, "t.tmpl", tt.text)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%q: err = %v, want it to contain %q", tt.text, err, tt.want)
		}
	}
}

// TestHelmCreateChartHostile renders the templates of `helm create`
// (testdata/helmcreate, ported: .Values -> .Spec, .Release.Name -> .Name)
// with a hostile string in each string field of the spec in turn. Each
// render either fails (a name or a label the tenant broke is refused) or
// has exactly the fields of the benign render, with the string in its one
// field.
func TestHelmCreateChartHostile(t *testing.T) {
	cfg, err := config.Load("testdata/helmcreate/stencil.yaml")
	if err != nil {
		t.Fatal(err)
	}
	set, err := Load(cfg, cfg.Resources[0], Options{})
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile("testdata/helmcreate/spec.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Spec map[string]any `json:"spec"`
	}
	if err := yaml.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	spec, err := view.CopyJSONValue(doc.Spec)
	if err != nil {
		t.Fatal(err)
	}
	render := func(spec map[string]any) (map[string][]string, []*unstructured.Unstructured, error) {
		p := parent()
		p.Spec = spec
		children, err := set.Render(p)
		if err != nil {
			return nil, nil, err
		}
		paths := map[string][]string{}
		for _, c := range children {
			paths[c.GetKind()] = fieldPaths(c.Object, "")
		}
		return paths, children, nil
	}
	benign, _, err := render(spec.(map[string]any))
	if err != nil {
		t.Fatal(err)
	}
	var leaves [][]string
	var walk func(path []string, v any)
	walk = func(path []string, v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, e := range v {
				walk(append(slices.Clone(path), k), e)
			}
		case string:
			leaves = append(leaves, path)
		}
	}
	walk(nil, spec)
	r := rand.New(rand.NewPCG(21, 2))
	rendered, refused := 0, 0
	for _, leaf := range leaves {
		for range 100 {
			s := hostileString(r)
			hostile, _ := view.CopyJSONValue(spec)
			m := hostile.(map[string]any)
			for _, k := range leaf[:len(leaf)-1] {
				m = m[k].(map[string]any)
			}
			m[leaf[len(leaf)-1]] = s
			paths, children, err := render(hostile.(map[string]any))
			if err != nil {
				var re *engine.RenderError
				if !errors.As(err, &re) {
					t.Fatalf("%v = %q: %v is not a engine.RenderError", leaf, s, err)
				}
				refused++
				continue
			}
			rendered++
			if !reflect.DeepEqual(paths, benign) {
				t.Errorf("%v = %q: the children's shape changed:\n got %v\nwant %v", leaf, s, paths, benign)
			}
			found := false
			for _, c := range children {
				found = found || containsString(c.Object, s)
			}
			if !found && !strings.Contains(strings.Join(leaf, "."), "Override") {
				t.Errorf("%v = %q: the string is in no field of the children", leaf, s)
			}
		}
	}
	t.Logf("%d string fields, %d hostile renders, %d refused (a broken name or label), %d rendered with the benign shape", len(leaves), rendered+refused, refused, rendered)
}

// containsString says whether s is a value (or is within a value) in v.
func containsString(v any, s string) bool {
	switch v := v.(type) {
	case map[string]any:
		for _, e := range v {
			if containsString(e, s) {
				return true
			}
		}
	case []any:
		for _, e := range v {
			if containsString(e, s) {
				return true
			}
		}
	case string:
		return strings.Contains(v, s)
	}
	return false
}

// c1Control reports whether s holds a C1 control character (NEL among
// them), which a child's key may not hold.
func c1Control(s string) bool {
	return strings.ContainsFunc(s, func(r rune) bool { return r >= 0x80 && r < 0xa0 })
}
