package templates

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"stencil.dev/stencil/config"
)

// BenchmarkChartRender measures chart mode's render cost per resource
// against own templates' for the same work: a Hello (crds/samples) served
// by the chart crds/charts/hello (the hellos entry of crds/stencil.yaml)
// and by test/integration/testdata/hello-templates, which render the same
// Deployment, Service and ConfigMap. It reports the ratio (target: within
// 1.3x), in-process, without the render workers (renderworker's
// BenchmarkRenderWall prices them). The chart also renders what own
// templates have no counterpart for, a test hook and NOTES.txt (Helm
// renders both, and stencil reports them); "chart-children" is the same
// chart without them: the three children alone, the same work.
func BenchmarkChartRender(b *testing.B) {
	defer func(v bool) { verifyFastPath = v }(verifyFastPath)
	verifyFastPath = false
	chartSet := exampleSets(b)["hello"]
	cfg, err := config.Load(filepath.Join("..", "test", "integration", "testdata", "hello-templates", "stencil.yaml"))
	if err != nil {
		b.Fatal(err)
	}
	sets, err := LoadAll(cfg, Options{})
	if err != nil {
		b.Fatal(err)
	}
	parent := sampleParent(b, "hello.yaml", chartSet.Resource().GVR())
	childrenOnly := chartWithoutHooks(b, chartSet)
	per := map[string]time.Duration{}
	for _, c := range []struct {
		name string
		set  *Set
	}{{"templates", sets[0]}, {"chart", chartSet}, {"chart-children", childrenOnly}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			start := time.Now()
			for b.Loop() {
				children, err := c.set.Render(parent)
				if err != nil || len(children) != 3 {
					b.Fatalf("%d children, %v; want 3", len(children), err)
				}
			}
			per[c.name] = time.Since(start) / time.Duration(b.N)
		})
	}
	if per["templates"] > 0 && per["chart"] > 0 {
		fmt.Printf("BenchmarkChartRender: the Hello's 3 children: own templates %s, chart %s per resource: %.2fx; without the chart's test hook and NOTES.txt %s: %.2fx (target: at most 1.3x)\n",
			per["templates"], per["chart"], float64(per["chart"])/float64(per["templates"]),
			per["chart-children"], float64(per["chart-children"])/float64(per["templates"]))
	}
}

// chartWithoutHooks loads set's entry again with a copy of its chart that
// has no tests/ and no NOTES.txt.
func chartWithoutHooks(b *testing.B, set *Set) *Set {
	b.Helper()
	dir := filepath.Join(b.TempDir(), "hello")
	if err := os.CopyFS(dir, os.DirFS(filepath.Join("..", "crds", "charts", "hello"))); err != nil {
		b.Fatal(err)
	}
	for _, p := range []string{"templates/tests", "templates/NOTES.txt"} {
		if err := os.RemoveAll(filepath.Join(dir, p)); err != nil {
			b.Fatal(err)
		}
	}
	res := set.Resource()
	cfgPath := filepath.Join(filepath.Dir(dir), "stencil.yaml")
	cfgText := fmt.Sprintf("resources:\n  - group: %s\n    version: %s\n    resource: %s\n    chart: hello\n", res.Group, res.Version, res.Resource)
	if err := os.WriteFile(cfgPath, []byte(cfgText), 0o644); err != nil {
		b.Fatal(err)
	}
	cfg, err := config.Load(cfgPath)
	if err != nil {
		b.Fatal(err)
	}
	sets, err := LoadAll(cfg, Options{})
	if err != nil {
		b.Fatal(err)
	}
	return sets[0]
}
