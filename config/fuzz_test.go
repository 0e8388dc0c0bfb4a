package config

import (
	"os"
	"path/filepath"
	"testing"

	"k8s.io/apimachinery/pkg/labels"
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
			if r.Version == "" || r.Resource == "" || len(r.Templates) == 0 && r.Chart == "" {
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
