package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// TestLoadWatches reads the example watches.yaml, given by a relative
// path as on a command line, into the chart entry crds/stencil.yaml has.
func TestLoadWatches(t *testing.T) {
	resolve := func(gvk schema.GroupVersionKind) (string, error) {
		if gvk == (schema.GroupVersionKind{Group: "charts.example.com", Version: "v1", Kind: "Hello"}) {
			return "hellos", nil
		}
		return "", errors.New("not served")
	}
	cfg, err := LoadWatches(filepath.Join("..", "crds", "charts", "watches.yaml"), resolve)
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Resources) != 1 {
		t.Fatalf("%d resources, want 1", len(cfg.Resources))
	}
	r := cfg.Resources[0]
	want, _ := filepath.Abs(filepath.Join("..", "crds", "charts", "hello"))
	if r.Resource != "hellos" || cfg.TemplatePath(r.Chart) != want || !r.ChildrenFromChart {
		t.Errorf("entry %+v (chart at %s), want hellos served from %s", r, cfg.TemplatePath(r.Chart), want)
	}
	var kinds []string
	for _, k := range r.Children {
		kinds = append(kinds, k.APIVersion+" "+k.Kind)
	}
	if got := strings.Join(kinds, ", "); got != "apps/v1 Deployment, v1 ConfigMap, v1 Service" {
		t.Errorf("child kinds %s, want the chart's three (its test hook's Pod left out)", got)
	}

	bad := filepath.Join(t.TempDir(), "watches.yaml")
	if err := os.WriteFile(bad, []byte("- {group: nope.example.com, version: v1, kind: Nope, chart: x}\n- {version: v1}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = LoadWatches(bad, resolve)
	for _, want := range []string{"watches[0] (nope.example.com/v1, Kind=Nope): kind: not served", "watches[1]", "version and kind are required"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v lacks %q", err, want)
		}
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
	fromConfig, err := Load(cfgPath)
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	fromWatches, err := LoadWatches(watchesPath, func(schema.GroupVersionKind) (string, error) { return "hellos", nil })
	if err != nil {
		t.Fatalf("watches.yaml: %v", err)
	}
	for name, cfg := range map[string]*Config{"config": fromConfig, "watches.yaml": fromWatches} {
		got := cfg.Resources[0].OverrideValues
		if got["image.repository"] != "registry.internal/nginx@sha256:abc" || got["image.tag"] != "x" || got["replicaCount"] != "2" {
			t.Errorf("%s: overrideValues %v", name, got)
		}
	}
}
