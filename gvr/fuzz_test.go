package gvr

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// FuzzParseConfig feeds arbitrary bytes to the config parser: it must never
// panic, and whatever it accepts must satisfy the invariants Load promises.
func FuzzParseConfig(f *testing.F) {
	example, err := os.ReadFile(filepath.Join("..", "crds", "stencil.yaml"))
	if err != nil {
		f.Fatal(err)
	}
	for _, seed := range []string{
		string(example),
		validConfig,
		"",
		"resources: []",
		"resources: [{}]",
		"resources: [null, 1, 'x', [], {group: 1}]",
		"resources:\n  - version: v1\n    resource: pods\n    templates: [webapp/deployment.yaml.tmpl, webapp/deployment.yaml.tmpl]\n",
		"resources:\n  - version: v1\n    resource: pods\n    templates: [webapp/service.yaml.tmpl]\n    selector: 'a in ((b'\n    namespaces: [x, x, X]\n",
		"resources:\n  - {version: v1, resource: Pods, templates: ['']}\n  - {version: v1, resource: Pods, templates: ['../stencil.yaml']}\n",
		"a: &a [*a]",
		"resources: &r [*r]",
		"{\"resources\": [{\"version\": \"v1\", \"resource\": \"pods\", \"templates\": [\"/\"]}]}",
		"resources:\n  - version: v1\n    resource: pods\n    templates: [webapp/service.yaml.tmpl]\n    statusTemplate: 7\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := ParseConfig(filepath.Join("..", "crds", "stencil.yaml"), data)
		if err != nil {
			if cfg != nil {
				t.Fatalf("config returned with error %v", err)
			}
			return
		}
		if len(cfg.Resources) == 0 {
			t.Fatal("accepted a config without resources")
		}
		seen := map[schema.GroupVersionResource]bool{}
		for _, r := range cfg.Resources {
			if r.Version == "" || r.Resource == "" || len(r.Templates) == 0 && (r.Chart == "" || len(r.Children) == 0) {
				t.Fatalf("accepted incomplete entry %+v", r)
			}
			if seen[r.GVR()] {
				t.Fatalf("accepted duplicate %v", r.GVR())
			}
			seen[r.GVR()] = true
			if _, err := labels.Parse(r.Selector); err != nil {
				t.Fatalf("accepted bad selector %q", r.Selector)
			}
			for _, tmpl := range r.Templates {
				if st, err := os.Stat(cfg.TemplatePath(tmpl.Path)); err != nil || !st.Mode().IsRegular() {
					t.Fatalf("accepted missing template %q", tmpl)
				}
			}
		}
	})
}

// FuzzNewObject converts arbitrary JSON objects: no panic, and a successful
// result is deep-copyable and detached from the input.
func FuzzNewObject(f *testing.F) {
	for _, seed := range []string{
		`{"kind":"WebApp","metadata":{"name":"demo","namespace":"x","generation":2},"spec":{"image":"x","replicas":2}}`,
		`{"kind":"WebApp","spec":[]}`,
		`{"kind":"WebApp","metadata":{"labels":{"a":1}}}`,
		`{"kind":"WebApp","metadata":{"generation":1e300}}`,
		`{"kind":"WebApp","spec":{"n":123456789012345678901234567890,"f":1.5e-300}}`,
		`{"kind":7,"status":null}`,
		`{"kind":"K","metadata":"x"}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var m map[string]any
		if err := json.Unmarshal(data, &m); err != nil || m == nil {
			return
		}
		u := &unstructured.Unstructured{Object: m}
		obj, err := NewObject(u, webapps)
		if err != nil {
			return
		}
		_ = runtime.DeepCopyJSONValue(obj.Spec)
		_ = runtime.DeepCopyJSONValue(obj.Status)
		obj.Spec["fuzz-marker"] = true
		if spec, ok := m["spec"].(map[string]any); ok {
			if _, leaked := spec["fuzz-marker"]; leaked {
				t.Fatal("Spec aliases the input")
			}
		}
	})
}
