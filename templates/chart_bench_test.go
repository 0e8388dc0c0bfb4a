package templates

import (
	"fmt"
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
// BenchmarkRenderWall prices them).
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
	per := map[string]time.Duration{}
	for _, c := range []struct {
		name string
		set  *Set
	}{{"templates", sets[0]}, {"chart", chartSet}} {
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
		fmt.Printf("BenchmarkChartRender: the Hello's 3 children: own templates %s, chart %s per resource: %.2fx (target: at most 1.3x)\n",
			per["templates"], per["chart"], float64(per["chart"])/float64(per["templates"]))
	}
}
