package templates

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"stencil.dev/stencil/config"
	"stencil.dev/stencil/templates/coverage"
)

// A chart entry's branches are counted as own templates' are, by the
// chart's file and line: those of a subchart no render enables are listed
// (not taken), and renders on several executors at once count into the
// same branches, not into a copy per parse.
func TestChartCoverage(t *testing.T) {
	dir, err := filepath.Abs(parityChart)
	if err != nil {
		t.Fatal(err)
	}
	cfgPath := filepath.Join(t.TempDir(), "stencil.yaml")
	if err := os.WriteFile(cfgPath, []byte("resources:\n  - group: charts.example.org\n    version: v1\n    resource: parities\n    chart: "+dir+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	cov := coverage.New()
	set, err := Load(cfg, cfg.Resources[0], Options{Coverage: cov})
	if err != nil {
		t.Fatal(err)
	}
	loaded, _ := cov.Branches()
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := parityParent(t, set, map[string]any{"podAnnotations": map[string]any{"a": "b"}, "depth": int64(i)}, false)
			if _, err := set.RenderHere(p, nil, nil); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	branches, taken := cov.Branches()
	if len(branches) != len(loaded) {
		t.Errorf("%d branches after the renders, %d at load: each parse counted apart", len(branches), len(loaded))
	}
	got := map[string]int64{}
	for i, b := range branches {
		got[b.Location+": "+b.Kind] = taken[i]
	}
	for loc, want := range map[string]bool{
		"parity/templates/deployment.yaml:14: with":                 true,  // podAnnotations set
		"parity/templates/deployment.yaml:14: else of with":         false, // podAnnotations set in every case
		"parity/templates/_helpers.tpl:13: if":                      true,  // countdown from depth > 0
		"parity/templates/_helpers.tpl:13: else of if":              true,  // and at 0
		"parity/charts/sub/templates/configmap.yaml:12: if":         false, // sub is disabled
		"parity/charts/sub/templates/configmap.yaml:12: else of if": false,
	} {
		n, ok := got[loc]
		switch {
		case !ok:
			t.Errorf("no branch %s in %v", loc, strings.Join(keysOf(got), "\n"))
		case (n > 0) != want:
			t.Errorf("%s taken %d times, want taken %v", loc, n, want)
		}
	}
}

func keysOf(m map[string]int64) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
