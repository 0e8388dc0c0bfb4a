package registry

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"stencil.dev/stencil/config"
	"stencil.dev/stencil/templates"
)

func TestReconfigureWithoutConfigOrTemplatesIsAnError(t *testing.T) {
	cfg, sets := testConfig(t, entries{})
	h := newHarness(t)
	h.build(cfg, sets)
	before := h.reg.Parent(webappGVR)
	for _, tt := range []struct {
		name string
		cfg  *config.Config
		sets []*templates.Set
	}{
		{"no config", nil, nil},
		{"no template set for the entry", cfg, nil},
	} {
		if _, err := h.reg.Reconfigure(h.ctx, tt.cfg, tt.sets, nil); err == nil {
			t.Errorf("%s: Reconfigure = nil, want an error", tt.name)
		}
	}
	if h.reg.Parent(webappGVR) != before {
		t.Error("a refused Reconfigure changed the webapps entry")
	}
}

func TestReloadWhoseInformersCannotSyncLeavesTheRunningConfigServing(t *testing.T) {
	cfg, sets := testConfig(t, entries{})
	h := newHarness(t, crdObject("webapps", "apps.example.com", "WebApp", "v1beta1"), webapp("ns", "a"))
	h.api.forbid.Store(true)
	h.build(cfg, sets)
	h.start()
	h.eventually("webapps is served and watched", func() bool { return h.served(webappGVR) && h.api.watching(webappGVR) > 0 })
	before, kinds := h.reg.Parent(webappGVR), h.reg.ChildKinds()

	// The config gains a ConfigMap child that stencil may not list.
	next, nextSets := testConfig(t, entries{configMapChild: true})
	_, err := h.reg.Reconfigure(h.ctx, next, nextSets, nil)
	if err == nil || !strings.Contains(err.Error(), "configmaps") || !apierrors.IsForbidden(err) {
		t.Fatalf("Reconfigure = %v, want a Forbidden error naming configmaps", err)
	}
	if got := h.reg.Parent(webappGVR); got.Set != before.Set || got.Informers[""] != before.Informers[""] || !h.served(webappGVR) {
		t.Errorf("webapps entry = %+v, want the running one %+v, served", got, before)
	}
	if childKind := h.reg.Child(configMapGVK); childKind != nil {
		t.Errorf("ConfigMap child kind published by a refused reload: %+v", childKind)
	}
	if got := h.reg.ChildKinds(); !sameChildKinds(got, kinds) {
		t.Errorf("child kinds after a refused reload = %v, want the running %v", got, kinds)
	}
	if n := h.rec.failures(); n != 0 {
		t.Errorf("WatchFailed told %d times of a refused reload's watch errors: the running replica is not unready", n)
	}
	// The running config keeps working: a new WebApp reaches its handler.
	h.create(webappGVR, webapp("ns", "b"))
	h.eventually("the parent handler is told of the new WebApp", func() bool { return h.rec.told(webappGVR, "ns/b") })

	// Once stencil may list ConfigMaps, the same reload commits, and keeps
	// the webapps informers (it watches the same objects).
	h.api.forbid.Store(false)
	gvrs, err := h.reg.Reconfigure(h.ctx, next, nextSets, nil)
	must(t, err)
	if !slices.Equal(gvrs, []schema.GroupVersionResource{webappGVR}) {
		t.Errorf("Reconfigure = %v, want the resources to render again: %v", gvrs, webappGVR)
	}
	if got := h.reg.Parent(webappGVR); got.Set != nextSets[0] || got.Informers[""] != before.Informers[""] {
		t.Errorf("webapps entry = %+v, want the new templates on the running informers", got)
	}
	if childKind := h.reg.Child(configMapGVK); childKind == nil || childKind.Informers[""] == nil || !childKind.Informers[""].HasSynced() {
		t.Errorf("ConfigMap child kind = %+v, want published with a synced informer", childKind)
	}
}

// TestReloadsRacingWithReadersAndCRDEventsEndOnTheLastConfig: reloads that
// add and remove a child kind and a resource each time, while CRD events
// re-evaluate every entry and readers go through the registry as workers
// do; each reload commits, and the last one is what serves.
func TestReloadsRacingWithReadersAndCRDEventsEndOnTheLastConfig(t *testing.T) {
	cfgSmall, setsSmall := testConfig(t, entries{})
	cfgBig, setsBig := testConfig(t, entries{configMapChild: true, gizmos: true})
	objs := []*unstructured.Unstructured{crdObject("webapps", "apps.example.com", "WebApp", "v1beta1"), crdObject("gizmos", "toys.example.com", "Gizmo", "v1")}
	for i := range 20 {
		objs = append(objs, webapp("ns", fmt.Sprintf("w%d", i)), gizmo("ns", fmt.Sprintf("g%d", i)))
	}
	h := startRegistry(t, cfgSmall, setsSmall, objs...)

	done := make(chan struct{})
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			for range 20 {
				h.reg.Refresh(h.ctx)
			}
		})
		wg.Go(func() {
			for {
				select {
				case <-done:
					return
				default:
				}
				for _, entry := range h.reg.Parents() {
					for _, k := range h.reg.Keys(entry.Res.GVR()) {
						_, _ = GetCached(entry.Informers, entry.Res.GVR().GroupResource(), k.Namespace, k.Name)
					}
				}
				for _, childKind := range h.reg.ChildKinds() {
					_ = InformerFor(childKind.Informers, "ns")
				}
				_, _ = h.reg.ResolveOwner("ns", &metav1.OwnerReference{APIVersion: "toys.example.com/v1", Kind: "Gizmo", Name: "g0", UID: "uid-g0"})
			}
		})
	}
	for i := range 10 {
		cfg, sets := cfgBig, setsBig
		if i%2 == 1 {
			cfg, sets = cfgSmall, setsSmall
		}
		if _, err := h.reg.Reconfigure(h.ctx, cfg, sets, nil); err != nil {
			t.Errorf("reload %d: %v", i, err)
		}
	}
	close(done)
	wg.Wait()
	// The last reload was to the small config: webapps only.
	h.eventually("the last config serves every WebApp", func() bool {
		entry := h.reg.Parent(webappGVR)
		return h.served(webappGVR) && h.reg.Parent(gizmoGVR) == nil && entry.Set == setsSmall[0] && len(h.reg.Keys(webappGVR)) == 20
	})
	if g, ok := h.reg.servedBy(schema.GroupKind{Group: "toys.example.com", Kind: "Gizmo"}); ok {
		t.Errorf("byKind[Gizmo] = %v once a reload removed gizmos, want none", g)
	}
	if removed := h.rec.removedLabels(); !slices.Contains(removed, "gizmos.toys.example.com") {
		t.Errorf("Removed hook told of %v, want gizmos among them", removed)
	}
}

func TestReloadAddingABuiltinResourcePublishesItsKind(t *testing.T) {
	cfg, sets := testConfig(t, entries{})
	h := newHarness(t)
	h.build(cfg, sets)
	// ConfigMaps as parents: served by the API server itself, no CRD.
	next, nextSets := testConfig(t, entries{configMapParent: true})
	_, err := h.reg.Reconfigure(h.ctx, next, nextSets, nil)
	must(t, err)
	if entry := h.reg.Parent(configMapGVR); entry == nil || !entry.Builtin || !entry.Served || entry.GVK != configMapGVK {
		t.Fatalf("configmaps entry = %+v, want built-in, served, of kind ConfigMap", entry)
	}
	if g, ok := h.reg.servedBy(configMapGVK.GroupKind()); !ok || g != configMapGVR {
		t.Errorf("byKind[ConfigMap] = %v, %v; want %v (owner references resolve to it)", g, ok, configMapGVR)
	}
}
