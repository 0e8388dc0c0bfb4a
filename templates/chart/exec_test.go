package chart

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"runtime/debug"
	"sync"
	"testing"

	"stencil.dev/stencil/config"
	"stencil.dev/stencil/templates/budget"
)

// Helm's function table and error formatting are pulled from pkg/engine
// (exec.go): they are there, and they are Helm's.
func TestHelmFunctionsArePulled(t *testing.T) {
	m := helmFuncMap()
	for _, name := range []string{"toYaml", "mustToYaml", "toYamlPretty", "fromYaml", "fromYamlArray", "toToml", "fromToml", "toJson", "fromJson", "fromJsonArray", "mustToDuration", "include", "tpl", "required", "lookup", "trunc"} {
		if m[name] == nil {
			t.Errorf("Helm's function table has no %s", name)
		}
	}
	if _, ok := m["env"]; ok {
		t.Error("Helm's function table has env, which Helm removes")
	}
	if got := helmToYAML(map[string]string{"b": "2", "a": "x: y"}); got != "a: 'x: y'\nb: \"2\"" {
		t.Errorf("toYaml = %q", got)
	}
	err := helmParseError("probe/templates/cm.yaml", errors.New("template: probe/templates/cm.yaml:3: unexpected EOF"))
	if got, want := fmt.Sprint(err), "parse error at (probe/templates/cm.yaml:3): unexpected EOF"; got != want {
		t.Errorf("parse error %q, want Helm's %q", got, want)
	}
}

// twoSubcharts is a chart whose subcharts a (condition a.enabled) and b
// both define "shared", which b's ConfigMap prints: with a enabled, a's
// define wins (Helm parses a's after b's), and without it b's. An
// executor of the wrong template set would print a's both times.
func twoSubcharts(t *testing.T) string {
	t.Helper()
	dir := writeChart(t, "a:\n  enabled: true\n", map[string]string{
		"templates/cm.yaml":          configMap + "  greeting: {{ .Values.greeting | default \"none\" | quote }}\n",
		"charts/a/Chart.yaml":        "apiVersion: v2\nname: a\nversion: 0.1.0\n",
		"charts/a/templates/_h.tpl":  `{{ define "shared" }}from-a{{ end }}`,
		"charts/b/Chart.yaml":        "apiVersion: v2\nname: b\nversion: 0.1.0\n",
		"charts/b/templates/_h.tpl":  `{{ define "shared" }}from-b{{ end }}`,
		"charts/b/templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-b\ndata:\n  shared: {{ include \"shared\" . }}\n  tag: {{ .Values.tag | default \"\" | quote }}\n",
	})
	deps := "apiVersion: v2\nname: probe\nversion: 0.1.0\ndependencies:\n  - name: a\n    version: 0.1.0\n    condition: a.enabled\n  - name: b\n    version: 0.1.0\n"
	if err := os.WriteFile(filepath.Join(dir, "Chart.yaml"), []byte(deps), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// objects renders c and returns its objects, decoded.
func objects(t *testing.T, c *Chart, spec map[string]any) []any {
	t.Helper()
	out, err := c.Render(context.Background(), Release{Name: "demo", Namespace: "team-a", Spec: spec, Budget: budget.Limits(config.RenderBudget{}.WithDefaults())})
	if err != nil {
		t.Fatal(err)
	}
	var objs []any
	for _, m := range out.Manifests {
		if m.Err != nil {
			t.Fatal(m.Err)
		}
		objs = append(objs, m.Object)
	}
	return objs
}

// A render on a reused executor renders what a freshly loaded chart
// renders, whatever the renders before it were given: the subcharts
// enabled, tenant text that is placed, text that is not.
func TestExecutorsKeepNothingBetweenRenders(t *testing.T) {
	dir := twoSubcharts(t)
	specs := []map[string]any{
		nil,
		{"a": map[string]any{"enabled": false}, "greeting": "hello: world"},
		{"greeting": "plain", "b": map[string]any{"tag": "{{ .Release.Name }}"}},
		{"a": map[string]any{"enabled": false}},
		{"greeting": "x\ny: z"},
	}
	want := make([][]any, len(specs))
	for i, spec := range specs {
		fresh, err := Load(dir)
		if err != nil {
			t.Fatal(err)
		}
		want[i] = objects(t, fresh, spec)
	}
	if reflect.DeepEqual(want[0], want[3]) {
		t.Fatal("the probe does not tell the subchart sets apart")
	}
	reused, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	for round := range 3 {
		for i, spec := range specs {
			if got := objects(t, reused, spec); !reflect.DeepEqual(got, want[i]) {
				t.Fatalf("round %d, spec %d: reused executor rendered\n%v\nfresh chart\n%v", round, i, got, want[i])
			}
		}
	}
}

// The templates are parsed once per set of enabled subcharts, not once
// per render; renders at once each have their own executor.
func TestChartParsedOncePerTemplateSet(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(-1)) // a GC may empty the pool
	// One P while the parses are counted: sync.Pool keeps a value put on
	// one P in that P's private slot, which a Get on another P cannot
	// take, so a goroutine moved between Ps meets an empty pool now and
	// then and parses again (1 in 20 runs on a loaded 2-core machine).
	procs := runtime.GOMAXPROCS(1)
	c, err := Load(twoSubcharts(t))
	if err != nil {
		t.Fatal(err)
	}
	with, without := objects(t, c, nil), objects(t, c, map[string]any{"a": map[string]any{"enabled": false}})
	for range 20 {
		objects(t, c, nil)
		objects(t, c, map[string]any{"a": map[string]any{"enabled": false}})
	}
	// Under the race detector sync.Pool drops a share of what it is given.
	if got := c.parses.Load(); got != 2 && !raceEnabled {
		t.Errorf("42 renders of 2 template sets parsed the templates %d times, want 2", got)
	}
	runtime.GOMAXPROCS(procs)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 10 {
				spec, want := map[string]any(nil), with
				if (g+i)%2 == 1 {
					spec, want = map[string]any{"a": map[string]any{"enabled": false}}, without
				}
				if got := objects(t, c, spec); !reflect.DeepEqual(got, want) {
					t.Errorf("concurrent render %d.%d: %v, want %v", g, i, got, want)
				}
			}
		})
	}
	wg.Wait()
}
