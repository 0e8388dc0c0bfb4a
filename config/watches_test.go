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
	if r.Resource != "hellos" || cfg.TemplatePath(r.Chart) != want {
		t.Errorf("entry %+v (chart at %s), want hellos served from %s", r, cfg.TemplatePath(r.Chart), want)
	}
	// The chart's kinds are read by package entry (entry_test.go).

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
