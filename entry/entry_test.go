package entry

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"stencil.dev/stencil/config"
)

// helloKinds are the kinds crds/charts/hello renders (its test hook's Pod
// left out).
var helloKinds = []config.ChildKind{{APIVersion: "apps/v1", Kind: "Deployment"}, {APIVersion: "v1", Kind: "ConfigMap"}, {APIVersion: "v1", Kind: "Service"}}

// TestCompileExampleConfig: the example config's chart entry gets the
// chart's kinds and its generated CRD, the config itself is left as
// decoded, and each chart is loaded once per compile.
func TestCompileExampleConfig(t *testing.T) {
	cfg, err := config.Load(filepath.Join("..", "crds", "stencil.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	before := chartLoads.Load()
	entries, err := Compile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	charts := 0
	for _, r := range cfg.Resources {
		if r.Chart != "" {
			charts++
		}
	}
	if loads := chartLoads.Load() - before; loads != int64(charts) || charts == 0 {
		t.Errorf("a compile loaded charts %d times, want once per chart entry (%d)", loads, charts)
	}
	hello := entries[3]
	if !hello.ChildrenFromChart || !reflect.DeepEqual(hello.Children, helloKinds) || hello.LoadedChart == nil || hello.CRD == nil {
		t.Errorf("hello entry: children %v (from chart %v), chart loaded %v, CRD %v", hello.Children, hello.ChildrenFromChart, hello.LoadedChart != nil, hello.CRD != nil)
	}
	if len(cfg.Resources[3].Children) != 0 {
		t.Errorf("the compile changed the config: children %v", cfg.Resources[3].Children)
	}
	if entries[0].Label != "resources[0] (webapps.v1beta1.apps.example.com)" || entries[0].File != cfg.Path {
		t.Errorf("entry 0 named %q in %q", entries[0].Label, entries[0].File)
	}
}

// TestCompileExpandsOverrides: $VAR in overrideValues is expanded from
// the environment on the compiled entry, as helm-operator does; the
// config keeps what the file says.
func TestCompileExpandsOverrides(t *testing.T) {
	t.Setenv("STENCIL_TEST_REPO", "registry.internal/hello")
	chart, _ := filepath.Abs(filepath.Join("..", "crds", "charts", "hello"))
	path := filepath.Join(t.TempDir(), "stencil.yaml")
	text := "resources:\n  - {group: charts.example.com, version: v1, resource: hellos, chart: " + chart +
		", overrideValues: {image.repository: $STENCIL_TEST_REPO, image.tag: a$b$}}\n"
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	e, err := CompileOne(cfg, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := config.Values{"image.repository": "registry.internal/hello", "image.tag": "a$"} // $b is unset
	if !reflect.DeepEqual(e.OverrideValues, want) {
		t.Errorf("compiled overrideValues %v, want %v", e.OverrideValues, want)
	}
	if got := cfg.Resources[0].OverrideValues["image.repository"]; got != "$STENCIL_TEST_REPO" {
		t.Errorf("the config's overrideValues changed: %q", got)
	}
}

// TestCompileWatches: a watches file's chart entry is compiled as a
// config's: the chart's kinds, named as the watches file names them.
func TestCompileWatches(t *testing.T) {
	cfg, err := config.LoadWatches(filepath.Join("..", "crds", "charts", "watches.yaml"), func(schema.GroupVersionKind) (string, error) { return "hellos", nil })
	if err != nil {
		t.Fatal(err)
	}
	entries, err := Compile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(entries[0].Children, helloKinds) || !strings.HasPrefix(entries[0].Label, "watches[0]") {
		t.Errorf("watches entry %q: children %v", entries[0].Label, entries[0].Children)
	}
}

// TestCompileErrorsNameTheEntry: a chart that does not load, and one
// whose templates name no kind, are errors naming file, entry and field.
func TestCompileErrorsNameTheEntry(t *testing.T) {
	dir := t.TempDir()
	for name, files := range map[string]map[string]string{
		"broken": {"Chart.yaml": "apiVersion: v2\nname: broken\nversion: 0.1.0\n", "templates/x.yaml": "{{ if }}", "values.yaml": "a: ["},
		"empty":  {"Chart.yaml": "apiVersion: v2\nname: empty\nversion: 0.1.0\n", "templates/NOTES.txt": "hi"},
	} {
		for f, text := range files {
			p := filepath.Join(dir, name, f)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	path := filepath.Join(dir, "stencil.yaml")
	text := "resources:\n  - {group: a.example.com, version: v1, resource: as, chart: broken}\n  - {group: b.example.com, version: v1, resource: bs, chart: empty}\n"
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	_, err = Compile(cfg)
	for _, want := range []string{
		path + ": resources[0] (as.v1.a.example.com): chart: broken: ",
		path + ": resources[1] (bs.v1.b.example.com): chart: empty: its templates name no namespaced kind to render",
	} {
		if err == nil || !slices.ContainsFunc(strings.Split(err.Error(), "\n"), func(l string) bool { return strings.HasPrefix(l, want) }) {
			t.Errorf("error %v lacks a line starting %q", err, want)
		}
	}
}

// TestWarnings: an entry allowed a kind that grants permissions is
// pointed out, naming file, entry and child.
func TestWarnings(t *testing.T) {
	e := &Entry{File: "stencil.yaml", Label: "resources[0] (as.v1.a.example.com)",
		Resource:    config.Resource{Resource: "as", Children: []config.ChildKind{{APIVersion: "v1", Kind: "ConfigMap"}, {APIVersion: "rbac.authorization.k8s.io/v1", Kind: "RoleBinding"}}},
		SchemaNotes: []string{"chart/values.schema.json: x"}}
	got := Warnings([]*Entry{e})
	want := []string{
		"stencil.yaml: resources[0] (as.v1.a.example.com): children[1]: RoleBinding.rbac.authorization.k8s.io grants permissions: whoever may create a as can grant, through stencil, what stencil's own Role allows (allowPermissionGrants: true)",
		"stencil.yaml: resources[0] (as.v1.a.example.com): schema: chart/values.schema.json: x",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("warnings\n%q\nwant\n%q", got, want)
	}
	// With an identity, what is granted is bounded by the identity's role.
	e.Identity, e.SchemaNotes = &config.Identity{Tenant: "builder"}, nil
	if got := Warnings([]*Entry{e}); len(got) != 1 || !strings.HasSuffix(got[0], "what the identity's role allows (tenant builder) (allowPermissionGrants: true)") {
		t.Errorf("warnings with an identity %q", got)
	}
}

// overrideValues expand $VAR from the environment, helm-operator's idiom
// (image.repository: $RELATED_IMAGE_NGINX), in the config and in
// watches.yaml alike; an unset variable expands to nothing, as there.
func TestOverrideValuesExpandTheEnvironment(t *testing.T) {
	t.Setenv("RELATED_IMAGE_X", "registry.internal/nginx@sha256:abc")
	chart, _ := filepath.Abs(filepath.Join("..", "crds", "charts", "hello"))
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "stencil.yaml")
	cfgText := "resources:\n  - group: charts.example.com\n    version: v1\n    resource: hellos\n    chart: " + chart +
		"\n    overrideValues:\n      image.repository: $RELATED_IMAGE_X\n      image.tag: ${UNSET_STENCIL_VAR}x\n      replicaCount: \"2\"\n"
	if err := os.WriteFile(cfgPath, []byte(cfgText), 0o644); err != nil {
		t.Fatal(err)
	}
	watchesPath := filepath.Join(dir, "watches.yaml")
	watchesText := "- group: charts.example.com\n  version: v1\n  kind: Hello\n  chart: " + chart +
		"\n  overrideValues:\n    image.repository: $RELATED_IMAGE_X\n    image.tag: ${UNSET_STENCIL_VAR}x\n    replicaCount: \"2\"\n"
	if err := os.WriteFile(watchesPath, []byte(watchesText), 0o644); err != nil {
		t.Fatal(err)
	}
	fromConfig, err := config.Load(cfgPath)
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	fromWatches, err := config.LoadWatches(watchesPath, func(schema.GroupVersionKind) (string, error) { return "hellos", nil })
	if err != nil {
		t.Fatalf("watches.yaml: %v", err)
	}
	for name, cfg := range map[string]*config.Config{"config": fromConfig, "watches.yaml": fromWatches} {
		e, err := CompileOne(cfg, 0)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got := e.OverrideValues
		if got["image.repository"] != "registry.internal/nginx@sha256:abc" || got["image.tag"] != "x" || got["replicaCount"] != "2" {
			t.Errorf("%s: overrideValues %v", name, got)
		}
	}
}
