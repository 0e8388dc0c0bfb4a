package templates

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"text/template"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"stencil.dev/stencil/config"
	"stencil.dev/stencil/contract"
	"stencil.dev/stencil/templates/engine"
	"stencil.dev/stencil/templates/view"
)

// loadSet writes the templates (name -> text) and a config listing them, in
// order, into a temporary directory, and loads the Set. A name starting with
// "status:" is the status template.
func loadSet(t *testing.T, opts Options, files ...string) *Set {
	t.Helper()
	s, err := tryLoadSet(t, opts, files...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func tryLoadSet(t *testing.T, opts Options, files ...string) (*Set, error) {
	t.Helper()
	dir := t.TempDir()
	var b strings.Builder
	b.WriteString("resources:\n  - group: apps.example.com\n    version: v1beta1\n    resource: webapps\n    templates:\n")
	var status string
	var helpers []string
	for i := 0; i < len(files); i += 2 {
		name, text := files[i], files[i+1]
		if n, ok := strings.CutPrefix(name, "status:"); ok {
			name, status = n, n
		} else if n, ok := strings.CutPrefix(name, "helper:"); ok {
			name, helpers = n, append(helpers, n)
		} else {
			fmt.Fprintf(&b, "      - %s\n", name)
		}
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if status != "" {
		fmt.Fprintf(&b, "    statusTemplate: %s\n", status)
	}
	for _, h := range helpers {
		fmt.Fprintf(&b, "    helpers: [%s]\n", h)
	}
	cfg, err := config.ParseConfig(filepath.Join(dir, "stencil.yaml"), []byte(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	return Load(cfg, cfg.Resources[0], opts)
}

func parent() *view.Object {
	return &view.Object{
		Name: "demo", Namespace: "team-a", UID: "uid-1", Generation: 2,
		Labels: map[string]string{}, Annotations: map[string]string{},
		Spec:     map[string]any{"image": "nginx", "replicas": int64(2)},
		Status:   map[string]any{},
		Resource: view.ResourceInfo{Group: "apps.example.com", Version: "v1beta1", Kind: "WebApp", Resource: "webapps"},
	}
}

const deployment = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ .Name }}
spec:
  replicas: {{ .Spec.replicas }}
`

func TestRenderStampsOwnerAndLabels(t *testing.T) {
	s := loadSet(t, Options{}, "d.tmpl", `# leading comment doc
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ .Name }}
  namespace: {{ .Namespace }}
  labels:
    app.kubernetes.io/managed-by: someone-else
    stencil.dev/owner-uid: forged
    keep: me
  ownerReferences:
    - {apiVersion: v1, kind: ConfigMap, name: x, uid: y}
spec:
  replicas: {{ .Spec.replicas }}
  ratio: 0.5
---

# only a comment
---
apiVersion: v1
kind: Service
metadata:
  name: {{ .Name }}-svc
`)
	p := parent()
	children, err := s.Render(p)
	if err != nil {
		t.Fatal(err)
	}
	if len(children) != 2 {
		t.Fatalf("got %d children, want 2", len(children))
	}
	yes := true
	wantRef := []metav1.OwnerReference{{APIVersion: "apps.example.com/v1beta1", Kind: "WebApp", Name: "demo", UID: "uid-1", Controller: &yes, BlockOwnerDeletion: &yes}}
	for _, c := range children {
		if c.GetNamespace() != "team-a" {
			t.Errorf("%s namespace = %q", c.GetName(), c.GetNamespace())
		}
		if got := c.GetOwnerReferences(); !reflect.DeepEqual(got, wantRef) {
			t.Errorf("%s ownerReferences = %+v", c.GetName(), got)
		}
		l := c.GetLabels()
		if l[contract.LabelManagedBy] != contract.ManagedByValue || l[contract.LabelOwnerUID] != "uid-1" {
			t.Errorf("%s labels = %v", c.GetName(), l)
		}
	}
	if children[0].GetLabels()["keep"] != "me" {
		t.Errorf("template label dropped: %v", children[0].GetLabels())
	}
	// Numbers are int64/float64 so the apimachinery deep copy works.
	if r := children[0].Object["spec"].(map[string]any)["replicas"]; r != int64(2) {
		t.Errorf("replicas = %#v (%T), want int64", r, r)
	}
	if r := children[0].Object["spec"].(map[string]any)["ratio"]; r != 0.5 {
		t.Errorf("ratio = %#v (%T), want float64", r, r)
	}
	_ = children[0].DeepCopy()
	if !reflect.DeepEqual(p, parent()) {
		t.Errorf("Render mutated its parent")
	}
	if k := s.Kinds(); !reflect.DeepEqual(k, DefaultKinds) {
		t.Errorf("Kinds() = %v", k)
	}
	if s.Resource().Resource != "webapps" {
		t.Errorf("Resource() = %v", s.Resource())
	}
}

func TestRenderErrors(t *testing.T) {
	tests := []struct {
		name  string
		files []string
		spec  map[string]any
		want  []string // the joined error's lines, as prefixes or substrings
		line  int      // engine.RenderError.Line of the first error
	}{
		{"missing key names template and line",
			[]string{"web/deployment.yaml.tmpl", "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: x\nspec:\n  image: {{ .Spec.image }}\n"},
			map[string]any{}, []string{`web/deployment.yaml.tmpl:6: map has no entry for key "image"`}, 6},
		{"required",
			[]string{"d.tmpl", "{{ required \"spec.image must be set\" .Spec.image }}"},
			map[string]any{"image": ""}, []string{"d.tmpl:1: error calling required: spec.image must be set"}, 1},
		{"other namespace",
			[]string{"d.tmpl", "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: x\n  namespace: kube-system\n"},
			nil, []string{`d.tmpl: rendered document 1 (output line 1): Deployment "x" names namespace "kube-system": children must live in the resource's namespace "team-a"`}, 0},
		{"disallowed kind",
			[]string{"d.tmpl", "apiVersion: v1\nkind: Pod\nmetadata:\n  name: x\n"},
			nil, []string{"d.tmpl: rendered document 1 (output line 1): kind v1 Pod is not allowed (allowed: apps/v1 Deployment, v1 Service)"}, 0},
		{"allowed kind at another version",
			[]string{"d.tmpl", "apiVersion: apps/v1beta1\nkind: Deployment\nmetadata:\n  name: x\n"},
			nil, []string{"kind apps/v1beta1 Deployment is not allowed"}, 0},
		{"missing name",
			[]string{"d.tmpl", "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  generateName: x-\n"},
			nil, []string{"d.tmpl: rendered document 1 (output line 1): metadata.name is required"}, 0},
		{"missing kind", []string{"d.tmpl", "apiVersion: v1\nmetadata: {name: x}\n"}, nil, []string{"kind is required"}, 0},
		{"missing apiVersion", []string{"d.tmpl", "kind: Service\nmetadata: {name: x}\n"}, nil, []string{"apiVersion is required"}, 0},
		{"invalid service name", []string{"d.tmpl", "apiVersion: v1\nkind: Service\nmetadata: {name: a.b}\n"}, nil, []string{`Service name "a.b" is invalid`}, 0},
		{"invalid label value", []string{"d.tmpl", "apiVersion: v1\nkind: Service\nmetadata: {name: a, labels: {x: '-bad-'}}\n"}, nil, []string{`label x="-bad-" is invalid`}, 0},
		{"label not a string", []string{"d.tmpl", "apiVersion: v1\nkind: Service\nmetadata: {name: a, labels: {x: 1}}\n"}, nil, []string{"metadata.labels:"}, 0},
		{"metadata not a map", []string{"d.tmpl", "apiVersion: v1\nkind: Service\nmetadata: [a]\n"}, nil, []string{"metadata is a list, want a mapping"}, 0},
		{"not an object", []string{"d.tmpl", "- a\n"}, nil, []string{"renders a list, want a Kubernetes object"}, 0},
		{"bad YAML", []string{"d.tmpl", deployment + "---\nkind: [\n"}, nil, []string{"d.tmpl: rendered document 2 (output line 8): not valid YAML"}, 0},
		{"content after separator", []string{"d.tmpl", deployment + "--- {apiVersion: v1}\n"}, nil,
			[]string{`d.tmpl: output line 7: "--- {apiVersion: v1}": only a comment may follow the --- document separator`}, 0},
		{"document end marker separates", []string{"d.tmpl", deployment + "...\napiVersion: v1\nkind: Pod\n"}, nil,
			[]string{"d.tmpl: rendered document 2 (output line 8): metadata.name is required"}, 0},
		{"duplicate key in output", []string{"d.tmpl", "apiVersion: v1\napiVersion: v1\n"}, nil, []string{`not valid YAML: yaml: unmarshal errors: line 2: key "apiVersion" already set in map`}, 0},
		{"duplicate name across templates",
			[]string{"a.tmpl", deployment, "b.tmpl", "apiVersion: v1\nkind: Service\nmetadata: {name: demo}\n---\n" + deployment},
			nil, []string{`b.tmpl: rendered document 2 (output line 5): Deployment "demo" is also rendered by a.tmpl rendered document 1 (output line 1): names must be unique per kind`}, 0},
		{"every template reported",
			[]string{"a.tmpl", "{{ .Spec.nope }}", "b.tmpl", "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n"},
			nil, []string{`a.tmpl:1: map has no entry for key "nope"`, "b.tmpl: rendered document 1 (output line 1): kind v1 Pod is not allowed"}, 1},
		{"function error", []string{"d.tmpl", "\n\nx: {{ fail (printf \"%s is not a whole number\" .Spec.image) }}"}, nil, []string{`d.tmpl:3: error calling fail: nginx is not a whole number`}, 3},
		{"index out of range", []string{"d.tmpl", "{{ index .Spec.list 5 }}"}, map[string]any{"list": []any{}}, []string{"d.tmpl:1: error calling index: index out of range: 5"}, 1},
		{"output too large", []string{"d.tmpl", `{{ range .Spec.list }}{{ range $.Spec.list }}{{ range $.Spec.list }}{{ printf "%1000s" "x" }}{{ end }}{{ end }}{{ end }}`},
			map[string]any{"list": make([]any, 20)}, []string{"d.tmpl: output exceeds 4194304 bytes, the bound"}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := loadSet(t, Options{}, tt.files...)
			p := parent()
			if tt.spec != nil {
				p.Spec = tt.spec
			}
			children, err := s.Render(p)
			if err == nil {
				t.Fatalf("no error; children %v", children)
			}
			lines := strings.Split(err.Error(), "\n")
			if len(lines) != len(tt.want) {
				t.Errorf("got %d errors, want %d: %v", len(lines), len(tt.want), err)
			}
			for i, want := range tt.want {
				if i < len(lines) && !strings.Contains(lines[i], want) {
					t.Errorf("error %d = %q\nwant it to contain %q", i, lines[i], want)
				}
			}
			var re *engine.RenderError
			if !errors.As(err, &re) {
				t.Fatalf("errors.As(*engine.RenderError) failed for %v", err)
			}
			if re.Line != tt.line {
				t.Errorf("Line = %d, want %d", re.Line, tt.line)
			}
		})
	}
}

func TestRenderExecErrorUnwraps(t *testing.T) {
	s := loadSet(t, Options{}, "d.tmpl", "{{ .Spec.nope }}")
	_, err := s.Render(parent())
	var ee template.ExecError
	if !errors.As(err, &ee) {
		t.Errorf("errors.As(template.ExecError) failed for %v", err)
	}
}

func TestRenderErrorMessage(t *testing.T) {
	e := &engine.RenderError{Template: "webapp/deployment.yaml.tmpl", Line: 12, Err: errors.New(`map has no entry for key "image"`)}
	if got, want := e.Error(), `webapp/deployment.yaml.tmpl:12: map has no entry for key "image"`; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	e.Line = 0
	if got, want := e.Error(), `webapp/deployment.yaml.tmpl: map has no entry for key "image"`; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
}

func TestRenderParentWithoutNamespace(t *testing.T) {
	s := loadSet(t, Options{}, "d.tmpl", deployment)
	p := parent()
	p.Namespace = ""
	_, err := s.Render(p)
	var re *engine.RenderError
	if !errors.As(err, &re) || !strings.HasPrefix(err.Error(), `rendering WebApp "demo": children need a namespace`) {
		t.Errorf("err = %v, want a engine.RenderError", err)
	}
	if _, err := s.Render(nil); err == nil {
		t.Error("Render(nil) succeeded")
	}
}

func TestRenderAllowedKinds(t *testing.T) {
	cm := schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	s := loadSet(t, Options{AllowedKinds: []schema.GroupVersionKind{cm}}, "d.tmpl", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n")
	if _, err := s.Render(parent()); err != nil {
		t.Fatal(err)
	}
	s = loadSet(t, Options{AllowedKinds: []schema.GroupVersionKind{cm}}, "d.tmpl", deployment)
	if _, err := s.Render(parent()); err == nil || !strings.Contains(err.Error(), "(allowed: v1 ConfigMap)") {
		t.Errorf("err = %v", err)
	}
}

func TestRenderEmptyOutput(t *testing.T) {
	s := loadSet(t, Options{}, "d.tmpl", "{{ if false }}x{{ end }}\n# nothing\n---\n")
	children, err := s.Render(parent())
	if err != nil || len(children) != 0 {
		t.Errorf("Render = %v, %v; want no children", children, err)
	}
}

func TestRenderStatus(t *testing.T) {
	s := loadSet(t, Options{}, "d.tmpl", deployment, "status:s.tmpl", "url: http://{{ .Name }}\ncount: {{ .Spec.replicas }}\n")
	got, err := s.RenderStatus(parent())
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]any{"url": "http://demo", "count": int64(2)}; !reflect.DeepEqual(got, want) {
		t.Errorf("RenderStatus = %#v, want %#v", got, want)
	}

	s = loadSet(t, Options{}, "d.tmpl", deployment)
	if got, err := s.RenderStatus(parent()); got != nil || err != nil {
		t.Errorf("without status template: %v, %v; want nil, nil", got, err)
	}

	for text, want := range map[string]string{
		"phase: Ready\n":           "s.tmpl: sets status.phase, which the controller owns",
		"- a\n":                    "s.tmpl: renders a list, want a mapping of status fields",
		"a: 1\n---\nb: 2\n":        "s.tmpl: renders 2 documents, want one mapping",
		"a: {{ .Spec.missing }}\n": `s.tmpl:1: map has no entry for key "missing"`,
	} {
		s := loadSet(t, Options{}, "d.tmpl", deployment, "status:s.tmpl", text)
		_, err := s.RenderStatus(parent())
		var re *engine.RenderError
		if !errors.As(err, &re) || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: err = %v, want engine.RenderError containing %q", text, err, want)
		}
	}
	s = loadSet(t, Options{}, "d.tmpl", deployment, "status:s.tmpl", "# nothing\n")
	if got, err := s.RenderStatus(parent()); err != nil || len(got) != 0 || got == nil {
		t.Errorf("empty status output: %#v, %v; want empty map", got, err)
	}
}

func TestLoadErrors(t *testing.T) {
	_, err := tryLoadSet(t, Options{}, "a.tmpl", "ok", "b.tmpl", "line1\n{{ .Name ", "c.tmpl", "{{ nosuchfunc }}", "status:s.tmpl", "{{ end }}")
	if err == nil {
		t.Fatal("no error")
	}
	lines := strings.Split(err.Error(), "\n")
	want := []string{
		"resources[0] (webapps.v1beta1.apps.example.com): templates[1]: template: b.tmpl:2: unclosed action",
		`resources[0] (webapps.v1beta1.apps.example.com): templates[2]: template: c.tmpl:1: function "nosuchfunc" not defined`,
		"resources[0] (webapps.v1beta1.apps.example.com): statusTemplate: template: s.tmpl:1: unexpected {{end}}",
	}
	if len(lines) != len(want) {
		t.Fatalf("got %d errors, want %d:\n%v", len(lines), len(want), err)
	}
	for i := range want {
		if !strings.Contains(lines[i], want[i]) || !strings.Contains(lines[i], "stencil.yaml: ") {
			t.Errorf("error %d = %q\nwant it to contain %q", i, lines[i], want[i])
		}
	}
	var fe *config.FieldError
	if !errors.As(err, &fe) {
		t.Errorf("errors.As(*config.FieldError) failed")
	}
}

func TestLoadAll(t *testing.T) {
	cfg, err := config.Load(filepath.Join("..", "crds", "stencil.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	sets, err := LoadAll(cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(sets) != 4 || sets[0].Resource().Resource != "webapps" || sets[1].Resource().Resource != "memcacheds" || sets[2].Resource().Resource != "appstacks" ||
		sets[3].Resource().Resource != "hellos" || sets[3].Chart() == nil || sets[0].Chart() != nil {
		t.Errorf("LoadAll returned %d sets in the wrong order", len(sets))
	}
	if sets[0].ReadsLive() || !sets[2].ReadsLive() {
		t.Error("ReadsLive: want only the AppStack entry's templates to read live children")
	}
}

// childText is child of a document's text, decoded as the text renderer
// did (tests and the baseline of BenchmarkRender).
func (s *Set) childText(body []byte, parent *view.Object) (*unstructured.Unstructured, error) {
	v, err := engine.DecodeYAML(body)
	if err != nil {
		return nil, err
	}
	return s.child(v, parent)
}

// TestTemplateOutputFollowsStringBytes: one template's output is bounded by
// the entry's renderBudget.stringBytes (the bound of one rendered object),
// not by a fixed 4 MiB: a 5 MiB ConfigMap fails at the default, naming the
// bound, and renders once the entry raises stringBytes to 8 MiB.
func TestTemplateOutputFollowsStringBytes(t *testing.T) {
	dir := t.TempDir()
	tmpl := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: big}\ndata:\n  big: \"{{ range until 5000 }}{{ printf \"%1000s\" \"x\" }}{{ end }}\"\n"
	if err := os.WriteFile(filepath.Join(dir, "big.tmpl"), []byte(tmpl), 0o644); err != nil {
		t.Fatal(err)
	}
	load := func(budget string) *Set {
		cfg, err := config.ParseConfig(filepath.Join(dir, "stencil.yaml"), []byte("resources:\n  - group: apps.example.com\n    version: v1beta1\n    resource: webapps\n    templates: [big.tmpl]\n    children: [{apiVersion: v1, kind: ConfigMap}]\n"+budget))
		if err != nil {
			t.Fatal(err)
		}
		sets, err := LoadAll(cfg, Options{})
		if err != nil {
			t.Fatal(err)
		}
		return sets[0]
	}
	_, err := load("").Render(parent())
	if err == nil || !strings.Contains(err.Error(), "big.tmpl: output exceeds 4194304 bytes, the bound of one template's output (renderBudget.stringBytes)") {
		t.Fatalf("at the default stringBytes: want the output bound named, got %v", err)
	}
	children, err := load("    renderBudget: {stringBytes: 8388608}\n").Render(parent())
	if err != nil {
		t.Fatalf("with stringBytes 8 MiB: %v", err)
	}
	if got := len(children[0].Object["data"].(map[string]any)["big"].(string)); got != 5_000_000 {
		t.Fatalf("with stringBytes 8 MiB: data.big is %d bytes, want 5,000,000", got)
	}
}
