package renderworker_test

import (
	"os"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/klog/v2"
	"sigs.k8s.io/yaml"

	"stencil.dev/stencil/controller/reload"
	"stencil.dev/stencil/renderworker"
	"stencil.dev/stencil/templates"
	"stencil.dev/stencil/templates/view"
)

// BenchmarkRenderWall renders the example WebApp (crds/samples) through
// the wall and in this process, in the same run, and prints what the wall
// adds per render: the request and the result across the pipes, encoded
// and decoded. Target: within 15% of the render in this process. It also
// renders it again and again through a wall with its memo (memo.go), as
// the syncs of a converging resource do: "reused".
func BenchmarkRenderWall(b *testing.B) {
	if !renderworker.Available() {
		b.Skip("render workers need Linux")
	}
	reg := prometheus.NewRegistry()
	m := renderworker.NewMetrics(reg)
	// The memo off: every render crosses the wall.
	set, parent := webAppSet(b, renderworker.Options{Size: 1, Logger: klog.Background().V(4), Metrics: m, MemoBytes: -1})
	reusing, _ := webAppSet(b, renderworker.Options{Size: 1, Logger: klog.Background().V(4)})
	// timed runs render as a sub-benchmark and returns its time per op.
	timed := func(name string, render func() (*templates.Result, error)) time.Duration {
		var per time.Duration
		b.Run(name, func(b *testing.B) {
			start := time.Now()
			for b.Loop() {
				if _, err := render(); err != nil {
					b.Fatal(err)
				}
			}
			per = time.Since(start) / time.Duration(b.N)
		})
		return per
	}
	walled := timed("wall", func() (*templates.Result, error) { return set.RenderWith(parent, nil) })
	here := timed("here", func() (*templates.Result, error) { return set.RenderHere(parent, nil, nil) })
	reused := timed("reused", func() (*templates.Result, error) { return reusing.RenderWith(parent, nil) })
	if here > 0 {
		starts := 0.0
		if mfs, err := reg.Gather(); err == nil {
			for _, mf := range mfs {
				if mf.GetName() == "stencil_render_worker_starts_total" {
					starts = mf.GetMetric()[0].GetCounter().GetValue()
				}
			}
		}
		b.Logf("BenchmarkRenderWall: through the wall %v, in this process %v per render: %.2fx; %.0f workers started; the same render again, from the memo: %v", walled, here, float64(walled)/float64(here), starts, reused)
	}
}

// webAppSet loads crds/stencil.yaml behind a pool of opts and returns the
// WebApp entry's set and the sample WebApp's view, rendered once (the
// worker started).
func webAppSet(b *testing.B, opts renderworker.Options) (*templates.Set, *view.Object) {
	pool, err := renderworker.NewPool(opts)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pool.Close)
	_, sets, err := reload.Source{Path: "../crds/stencil.yaml", Wall: pool}.Load()
	if err != nil {
		b.Fatal(err)
	}
	data, err := os.ReadFile("../crds/samples/webapp.yaml")
	if err != nil {
		b.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(data, &u.Object); err != nil {
		b.Fatal(err)
	}
	u.SetNamespace("default")
	u.SetUID("u-1")
	var set *templates.Set
	for _, s := range sets {
		if s.Resource().Resource == "webapps" {
			set = s
		}
	}
	parent, err := view.NewObject(u, set.Resource().GVR())
	if err != nil {
		b.Fatal(err)
	}
	if _, err := set.RenderWith(parent, nil); err != nil { // starts the worker
		b.Fatal(err)
	}
	return set, parent
}
