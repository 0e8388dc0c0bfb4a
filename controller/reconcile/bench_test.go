package reconcile

import (
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"

	"stencil.dev/stencil/controller/registry"
	"stencil.dev/stencil/templates/view"
)

// benchFixture fills the caches with n converged WebApps and their children.
func benchFixture(b *testing.B, n int) (*fixture, []Key) {
	t := &testing.T{}
	f := newFixture(t)
	var keys []Key
	for i := range n {
		name := fmt.Sprintf("app-%05d", i)
		p, children := converged(t, webapp(name, map[string]any{"image": "nginx:1.27", "replicas": int64(2), "port": int64(80)}))
		f.cache = append(f.cache, p)
		f.cache = append(f.cache, children...)
		keys = append(keys, Key{GVR: webappGVR, NamespacedName: types.NamespacedName{Namespace: "ns", Name: name}})
	}
	if t.Failed() {
		b.Fatal("building the fixture failed")
	}
	_, ctx := ktesting.NewTestContext(b)
	f.t = t
	f.newReconciler(ctx)
	return f, keys
}

// BenchmarkResync measures what a periodic resync costs per converged
// resource (render, compare with the cache, no API call), against the
// baseline of rendering alone measured in the same run: the difference is
// the controller's own overhead.
func BenchmarkResync(b *testing.B) {
	f, keys := benchFixture(b, 1000)
	ctx := klog.NewContext(b.Context(), klog.Background().V(0))
	b.Run("render-only-baseline", func(b *testing.B) {
		b.ReportAllocs()
		entry := f.c.reg.Parent(webappGVR)
		for i := 0; b.Loop(); i++ {
			k := keys[i%len(keys)]
			parent, err := registry.GetCached(entry.Informers, webappGVR.GroupResource(), k.Namespace, k.Name)
			if err != nil {
				b.Fatal(err)
			}
			obj, err := view.NewObject(parent, webappGVR)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := entry.Set.Render(obj); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("sync-converged", func(b *testing.B) {
		b.ReportAllocs()
		before := len(f.client.Actions())
		for i := 0; b.Loop(); i++ {
			if err := f.sync(ctx, keys[i%len(keys)]); err != nil {
				b.Fatal(err)
			}
		}
		if n := len(f.client.Actions()) - before; n != 0 {
			b.Fatalf("converged syncs made %d API calls", n)
		}
	})
}
