package templates

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"stencil.dev/stencil/config"
	"stencil.dev/stencil/templates/view"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden.yaml")

// sampleParent reads a sample custom resource from crds/samples and gives it
// what the API server would: a namespace, a UID and a generation.
func sampleParent(t testing.TB, file string, res schema.GroupVersionResource) *view.Object {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "crds", "samples", file))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := yaml.Unmarshal(data, &m, func(d *json.Decoder) *json.Decoder { d.UseNumber(); return d }); err != nil {
		t.Fatal(err)
	}
	v, err := view.CopyJSONValue(m)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: v.(map[string]any)}
	u.SetNamespace("default")
	u.SetUID("6f2c1f3e-0000-4000-8000-000000000001")
	u.SetGeneration(1)
	obj, err := view.NewObject(u, res)
	if err != nil {
		t.Fatal(err)
	}
	return obj
}

func exampleSets(t testing.TB) map[string]*Set {
	t.Helper()
	cfg, err := config.Load(filepath.Join("..", "crds", "stencil.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	sets, err := LoadAll(cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	bySample := map[string]*Set{}
	for _, s := range sets {
		switch s.Resource().Resource {
		case "webapps":
			bySample["webapp"] = s
		case "memcacheds":
			bySample["memcached"] = s
		case "hellos":
			bySample["hello"] = s
		}
	}
	return bySample
}

// TestGolden renders crds/samples through crds/stencil.yaml and compares
// with testdata/<sample>.golden.yaml (children) and
// testdata/<sample>-status.golden.yaml (status fields). Run with -update to
// rewrite them after an intended change.
func TestGolden(t *testing.T) {
	sets := exampleSets(t)
	for _, sample := range []string{"webapp", "memcached"} {
		t.Run(sample, func(t *testing.T) {
			s := sets[sample]
			if s == nil {
				t.Fatalf("crds/stencil.yaml has no entry for the %s sample", sample)
			}
			parent := sampleParent(t, sample+".yaml", s.Resource().GVR())
			children, err := s.Render(parent)
			if err != nil {
				t.Fatal(err)
			}
			var docs []string
			for _, c := range children {
				out, err := yaml.Marshal(c.Object)
				if err != nil {
					t.Fatal(err)
				}
				docs = append(docs, string(out))
			}
			golden(t, sample+".golden.yaml", []byte(strings.Join(docs, "---\n")))

			status, err := s.RenderStatus(parent)
			if err != nil {
				t.Fatal(err)
			}
			if status != nil {
				out, err := yaml.Marshal(status)
				if err != nil {
					t.Fatal(err)
				}
				golden(t, sample+"-status.golden.yaml", out)
			}

			// Rendering is deterministic.
			again, err := s.Render(parent)
			if err != nil {
				t.Fatal(err)
			}
			for i := range children {
				a, _ := yaml.Marshal(children[i].Object)
				b, _ := yaml.Marshal(again[i].Object)
				if !bytes.Equal(a, b) {
					t.Errorf("child %d differs between two renders", i)
				}
			}
		})
	}
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./templates -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs (run go test ./templates -update if intended)\ngot:\n%s\nwant:\n%s", path, got, want)
	}
}
