package reconcile

import (
	"errors"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2/ktesting"
	"stencil.dev/stencil/controller/reconcile/rollout"
	"stencil.dev/stencil/controller/requeue"
)

// A render that failed is not run again while the resource's spec and the
// templates are the same (the syncs its children's events bring cost no
// render), is run again on a spec change, and after the periodic resync.
func TestFailedRenderIsRunOncePerSpec(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	f := newFixture(t)
	p := webapp("demo", map[string]any{"replicas": int64(2)}) // no image: the render fails
	f.cache = append(f.cache, p)
	f.api = append(f.api, p)
	f.newReconciler(ctx)
	key := Key{GVR: webappGVR, NamespacedName: types.NamespacedName{Namespace: "ns", Name: "demo"}}
	renders := func() float64 {
		m := &dto.Metric{}
		must(t, f.c.opts.Metrics.renderErrors.WithLabelValues("webapps.apps.example.com").Write(m))
		return m.GetCounter().GetValue()
	}
	sync := func(step string, want float64) {
		t.Helper()
		if err := f.sync(ctx, key); !requeue.IsTerminal(err) {
			t.Fatalf("%s: err = %v, want the terminal render failure", step, err)
		}
		if got := renders(); got != want {
			t.Errorf("%s: %v failed renders in all, want %v", step, got, want)
		}
	}
	sync("first sync", 1)
	sync("a child's event", 1)
	sync("another child's event", 1)

	changed := p.DeepCopy()
	changed.Object["spec"].(map[string]any)["replicas"] = int64(3)
	changed.SetGeneration(2)
	changed.SetResourceVersion("2")
	must(t, f.c.reg.Parent(webappGVR).Informers[""].GetIndexer().Update(changed))
	sync("a spec change", 2)
	sync("the same spec again", 2)

	f.c.memory.RenderFailures.Reset()
	sync("after the periodic resync", 3)
}

// TestAnEntryLeavingTheConfigIsForgotten: what stencil remembers between
// syncs of a resource whose entry left the config (a fight episode, the
// last status patch, a refused child, a rollout) is dropped, since nothing
// queues that resource again; a configured resource's is kept.
func TestAnEntryLeavingTheConfigIsForgotten(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	f := newFixture(t)
	f.newReconciler(ctx)
	c := f.c
	gone := Key{GVR: schema.GroupVersionResource{Group: "cache.example.com", Version: "v1alpha1", Resource: "memcacheds"},
		NamespacedName: types.NamespacedName{Namespace: "ns", Name: "m"}}
	kept := Key{GVR: webappGVR, NamespacedName: types.NamespacedName{Namespace: "ns", Name: "a"}}
	ref := childRef{GVK: schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, Name: "x"}
	for _, k := range []Key{gone, kept} {
		c.memory.Guard.Deny(k, "fight")
		c.memory.Status.Set(k, "{}", "{}")
		c.memory.Refusals.Set(k, ref, "h", "1", errors.New("refused"))
	}
	c.rollouts.byGVR = map[schema.GroupVersionResource]*rollout.Tracker{gone.GVR: {}, kept.GVR: {}}
	c.ForgetUnconfigured()
	for _, tc := range []struct {
		k    Key
		want bool
	}{{gone, false}, {kept, true}} {
		fight, _ := c.memory.Guard.Episode(tc.k)
		sent := c.memory.Status.Matches(tc.k, "{}", "{}")
		refused := c.memory.Refusals.Get(tc.k, ref, "h", "1") != nil
		_, rolling := c.rollouts.byGVR[tc.k.GVR]
		if (fight != "") != tc.want || sent != tc.want || refused != tc.want || rolling != tc.want {
			t.Errorf("%s: fight %q, status %v, refusal %v, rollout %v remembered; want %v", tc.k, fight, sent, refused, rolling, tc.want)
		}
	}
}
