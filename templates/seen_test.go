package templates

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"text/template"

	"stencil.dev/stencil/templates/funcs"
	"stencil.dev/stencil/templates/view"
)

// seenCases are template texts and whether a render of them may read the
// resource's status. "helper" is defined beside each.
var seenCases = []struct {
	text, helper string
	sees         bool
}{
	{text: `{{ .Name }}-{{ .Spec.image }}`},
	{text: `{{ with .Spec.resources }}{{ toYaml . }}{{ end }}`},
	{text: `{{ range .Spec.items }}{{ . }}{{ end }}`},
	{text: `{{ range $i, $e := .Spec.items }}{{ $e }}{{ $.Name }}{{ end }}`},
	{text: `{{ include "helper" . }}`, helper: `{{ .Name }}`},
	{text: `{{ template "helper" . }}`, helper: `{{ .Labels }}`},
	{text: `{{ include "helper" $ }}`, helper: `{{ with .Spec }}{{ toJson . }}{{ end }}`},
	{text: `{{ get .Spec "replicas" 1 }}{{ hasKey .Labels "a" }}`},
	{text: `{{ if .Labels }}{{ toYaml .Labels }}{{ else }}{{ .Generation }}{{ end }}`},
	{text: `{{ $n := .Name }}{{ $n }}{{ $s := .Spec }}{{ toYaml $s }}`},

	{text: `{{ .Status.phase }}`, sees: true},
	{text: `{{ $.Status }}`, sees: true},
	{text: `{{ toYaml . }}`, sees: true},
	{text: `{{ toJson $ }}`, sees: true},
	{text: `{{ . }}`, sees: true},
	{text: `{{ printf "%v" . }}`, sees: true},
	{text: `{{ $root := . }}{{ $root.Name }}`, sees: true},
	{text: `{{ with .Spec }}{{ toYaml $ }}{{ end }}`, sees: true},
	{text: `{{ with .Spec.x }}{{ else }}{{ toYaml . }}{{ end }}`, sees: true},
	{text: `{{ include "helper" . }}`, helper: `{{ toYaml . }}`, sees: true},
	{text: `{{ include "helper" .Spec }}`, helper: `{{ . }}`, sees: true}, // . in helper taken to be the resource
	{text: `{{ include "helper" (dict "root" .) }}`, helper: `{{ .root.Name }}`, sees: true},
	{text: `{{ template "helper" (list .) }}`, helper: `{{ len . }}`, sees: true},
	{text: `{{ (get .Spec "a" dict).Status }}`, sees: true},
	{text: `{{ index . "Status" }}`, sees: true},
	{text: `{{ $x := .Spec }}{{ $x.Status }}`, sees: true},
	{text: `{{ range .Spec.items }}{{ $.Status.x }}{{ end }}`, sees: true},
}

// parseSeen parses text, and helper as "helper", as a set's root would
// hold them.
func parseSeen(t testing.TB, text, helper string) (*template.Template, error) {
	t.Helper()
	root := template.New("t.yaml.tmpl").Funcs(funcs.Hermetic()).Funcs(liveStubs)
	if helper != "" {
		if _, err := root.New("helper").Parse(helper); err != nil {
			return nil, err
		}
	}
	return root.Parse(text)
}

// TestSeesStatus holds the scan to each case: a template that reads the
// status, or hands the whole resource to a function, may read it.
func TestSeesStatus(t *testing.T) {
	for _, tc := range seenCases {
		root, err := parseSeen(t, tc.text, tc.helper)
		if err != nil {
			t.Fatalf("%s: %v", tc.text, err)
		}
		if got := seesStatus(root); got != tc.sees {
			t.Errorf("%s (helper %q): seesStatus = %v, want %v", tc.text, tc.helper, got, tc.sees)
		}
	}
}

// TestVisibleKeepsWhatIsRead renders through RenderWith: a template that
// reads .Status renders it, and a set that cannot read it is given none.
func TestVisibleKeepsWhatIsRead(t *testing.T) {
	parent := &view.Object{Name: "a", Namespace: "ns", UID: "u", Labels: map[string]string{}, Annotations: map[string]string{},
		Spec: map[string]any{}, Status: map[string]any{"phase": "Ready"}}
	reads := loadSet(t, Options{}, "svc.yaml.tmpl", `apiVersion: v1
kind: Service
metadata: {name: {{ .Name }}, annotations: {phase: {{ .Status.phase | quote }}}}
`)
	if !reads.SeesStatus() {
		t.Fatal("a template reading .Status.phase: SeesStatus false")
	}
	r, err := reads.RenderWith(parent, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := r.Children[0].GetAnnotations()["phase"]; got != "Ready" {
		t.Fatalf("rendered phase %v, want Ready", got)
	}
	const blindText = `apiVersion: v1
kind: Service
metadata: {name: {{ .Name }}}
`
	blind := loadSet(t, Options{}, "svc.yaml.tmpl", blindText)
	if blind.SeesStatus() {
		t.Fatal("a template naming no status: SeesStatus true")
	}
	if v := blind.Visible(parent); len(v.Status) != 0 || v.Spec == nil || parent.Status["phase"] != "Ready" {
		t.Fatalf("Visible of a status-blind set: status %v (want empty), the parent's %v (want unchanged)", v.Status, parent.Status)
	}
	// The status template and the helpers are read too.
	if !loadSet(t, Options{}, "svc.yaml.tmpl", blindText, "status:status.yaml.tmpl", "phase: {{ .Status.phase }}\n").SeesStatus() {
		t.Error("a status template reading .Status.phase: SeesStatus false")
	}
	if !loadSet(t, Options{}, "svc.yaml.tmpl", blindText, "helper:_h.tpl", `{{ define "h" }}{{ toYaml $ }}{{ end }}`).SeesStatus() {
		t.Error("a helper using $ as a value: SeesStatus false")
	}
}

// bigNumber finds a number a fuzzed template could loop over for long.
var bigNumber = regexp.MustCompile(`[0-9]{4}|[eE][0-9]`)

// FuzzSeesStatus checks the scan against execution: for any template
// text the scan says cannot read the status, rendering with two different
// statuses gives the same output, or the same error.
func FuzzSeesStatus(f *testing.F) {
	for _, tc := range seenCases {
		f.Add(tc.text, tc.helper)
	}
	f.Fuzz(func(t *testing.T, text, helper string) {
		if len(text)+len(helper) > 300 || bigNumber.MatchString(text+helper) || strings.Contains(text+helper, "until") ||
			strings.Contains(text+helper, "repeat") || strings.Contains(text+helper, "seq") {
			return // bounded renders only
		}
		root, err := parseSeen(t, text, helper)
		if err != nil || seesStatus(root) {
			return
		}
		root.Option("missingkey=error")
		run := func(status map[string]any) string {
			parent := &view.Object{Name: "a", Namespace: "ns", UID: "u", Labels: map[string]string{"l": "v"}, Annotations: map[string]string{},
				Spec: map[string]any{"items": []any{"x", map[string]any{"Status": "s"}}, "resources": map[string]any{"cpu": "1"}}, Status: status}
			var out bytes.Buffer
			err := root.Funcs(template.FuncMap{"include": func(name string, v any) (string, error) {
				var b bytes.Buffer
				err := root.ExecuteTemplate(&b, name, v)
				return b.String(), err
			}}).Execute(&out, parent)
			if err != nil {
				return "error: " + strings.ReplaceAll(err.Error(), "Ready", "?")
			}
			return out.String()
		}
		a := run(map[string]any{"phase": "Ready", "conditions": []any{map[string]any{"type": "Ready"}}})
		b := run(map[string]any{})
		if a != b {
			sa, _ := json.Marshal(a)
			sb, _ := json.Marshal(b)
			t.Fatalf("the scan says %q (helper %q) cannot read the status, yet it rendered %s with one and %s with none", text, helper, sa, sb)
		}
	})
}
