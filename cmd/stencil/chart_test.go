package main

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"stencil.dev/stencil/templates/view"
)

// chartData is the chart mode's test data: public charts vendored as they
// are published, value sets, and what the real helm template (v4.3.1)
// printed for each (templates/chart/testdata/regen.sh).
var chartData = filepath.Join("..", "..", "templates", "chart", "testdata")

// TestRenderChartsAsHelmTemplate renders every chart and value set of the
// test data with stencil render and compares it, object by object, with
// helm template's output for the same chart and values: the same objects,
// field for field, once stencil's own stamps are set aside (its two
// labels, which replace the chart's managed-by, the ownerReference and
// the namespace it fills in). Hooks and tests are not applied by stencil:
// they are compared as the list render prints on stderr.
func TestRenderChartsAsHelmTemplate(t *testing.T) {
	cases, err := filepath.Glob(filepath.Join(chartData, "values", "*.yaml"))
	if err != nil || len(cases) < 9 {
		t.Fatalf("value sets: %v (%d)", err, len(cases))
	}
	for _, valuesFile := range cases {
		name := strings.TrimSuffix(filepath.Base(valuesFile), ".yaml")
		chart, _, _ := strings.Cut(name, "-")
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			chartDir, err := filepath.Abs(filepath.Join(chartData, "charts", chart))
			if err != nil {
				t.Fatal(err)
			}
			config := filepath.Join(dir, "stencil.yaml")
			// Helm's semantics, in which a value is template text where the
			// chart runs it through tpl (nginx-extras does): stencil's
			// default prints a tenant's text literally
			// (TestTenantTextIsNotATemplate), tenantTemplates runs it.
			writeTestFile(t, config, fmt.Sprintf("resources:\n  - group: charts.example.org\n    version: v1\n    resource: %ss\n    chart: %s\n    tenantTemplates: true\n", chart, chartDir))
			values, err := os.ReadFile(valuesFile)
			if err != nil {
				t.Fatal(err)
			}
			var spec map[string]any
			if err := yaml.Unmarshal(values, &spec); err != nil {
				t.Fatal(err)
			}
			cr, err := yaml.Marshal(map[string]any{"apiVersion": "charts.example.org/v1", "kind": "Chart",
				"metadata": map[string]any{"name": "demo", "namespace": "team-a", "uid": "5d1c1f3e-0000-4000-8000-000000000001"}, "spec": spec})
			if err != nil {
				t.Fatal(err)
			}
			// The Kubernetes version the helm binary assumed (testdata README).
			r := stencil(t, string(cr), "render", "--config", config, "--kube-version", "v1.37.0", "-f", "-")
			if r.code != 0 {
				t.Fatalf("stencil render: exit %d\n%s", r.code, r.stderr)
			}
			golden, err := os.ReadFile(filepath.Join(chartData, "golden", name+".yaml"))
			if err != nil {
				t.Fatal(err)
			}
			want, hooks := objectsOf(t, string(golden), true)
			got, _ := objectsOf(t, r.stdout, false)
			if len(want) == 0 {
				t.Fatal("helm template rendered no object")
			}
			for _, k := range slices.Sorted(maps.Keys(want)) {
				g, ok := got[k]
				if !ok {
					t.Errorf("%s: helm template renders it, stencil render does not", k)
					continue
				}
				if !reflect.DeepEqual(g, want[k]) {
					gj, _ := json.MarshalIndent(g, "", "  ")
					wj, _ := json.MarshalIndent(want[k], "", "  ")
					t.Errorf("%s differs:\nstencil render:\n%s\nhelm template:\n%s", k, gj, wj)
				}
			}
			for k := range got {
				if _, ok := want[k]; !ok {
					t.Errorf("%s: stencil render renders it, helm template does not", k)
				}
			}
			for _, h := range hooks {
				if !strings.Contains(r.stderr, "not applied (hook or test): "+h) {
					t.Errorf("stderr does not list the hook %s:\n%s", h, r.stderr)
				}
			}
			t.Logf("%d objects as helm template renders them; %d hooks listed, not applied", len(want), len(hooks))
		})
	}
}

// objectsOf decodes a stream of objects, keyed by apiVersion, kind and
// name, with stencil's stamps set aside; from helm's output, the hooks
// are left out and returned as Kind/name (a random suffix cut off).
func objectsOf(t *testing.T, stream string, helm bool) (map[string]any, []string) {
	t.Helper()
	objs, err := view.DecodeObjects([]byte(stream))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]any{}
	var hooks []string
	for _, u := range objs {
		if _, hook := u.GetAnnotations()["helm.sh/hook"]; hook && helm {
			name := u.GetName()
			if i := strings.LastIndex(name, "-test-"); i > 0 {
				name = name[:i+len("-test-")]
			}
			hooks = append(hooks, u.GetKind()+"/"+name)
			continue
		}
		unstructured.RemoveNestedField(u.Object, "metadata", "ownerReferences")
		unstructured.RemoveNestedField(u.Object, "metadata", "namespace")
		unstructured.RemoveNestedField(u.Object, "metadata", "labels", "app.kubernetes.io/managed-by")
		unstructured.RemoveNestedField(u.Object, "metadata", "labels", "stencil.dev/owner-uid")
		if l, found, _ := unstructured.NestedMap(u.Object, "metadata", "labels"); found && len(l) == 0 {
			unstructured.RemoveNestedField(u.Object, "metadata", "labels")
		}
		key := u.GetAPIVersion() + " " + u.GetKind() + " " + u.GetName()
		b, err := json.Marshal(u.Object)
		if err != nil {
			t.Fatal(err)
		}
		var v any
		if err := json.Unmarshal(b, &v); err != nil {
			t.Fatal(err)
		}
		out[key] = v
	}
	return out, hooks
}

func writeTestFile(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}
