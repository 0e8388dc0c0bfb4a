package registry

import (
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestRegistryRelistsWhenItsCRDSchemaChanges: a change of a served CRD's
// generation (its schema) replaces the entry's informers with fresh ones
// that list anew, and their handler is told of every object again; a
// change that keeps the generation (the CRD's status) does not.
func TestRegistryRelistsWhenItsCRDSchemaChanges(t *testing.T) {
	cfg, sets := testConfig(t, entries{})
	webapps := crdObject("webapps", "apps.example.com", "WebApp", "v1beta1")
	webapps.SetGeneration(1)
	h := startRegistry(t, cfg, sets, webapps, webapp("ns", "a"))
	h.eventually("webapps is served and its WebApp told", func() bool {
		return h.served(webappGVR) && h.rec.told(webappGVR, "ns/a")
	})
	before := h.reg.Parent(webappGVR).Informers[""]
	told := func() int {
		h.rec.mu.Lock()
		defer h.rec.mu.Unlock()
		return h.rec.added[webappGVR]["ns/a"]
	}
	update := func(generation int64) {
		t.Helper()
		crd, err := h.api.Resource(CRDResource).Get(h.ctx, "webapps.apps.example.com", metav1.GetOptions{})
		must(t, err)
		crd.SetGeneration(generation)
		crd.SetResourceVersion(fmt.Sprint(h.api.rv.Add(1)))
		_, err = h.api.Resource(CRDResource).Update(h.ctx, crd, metav1.UpdateOptions{})
		must(t, err)
	}

	update(1) // the status, say: same generation
	h.eventually("the CRD cache shows the update", func() bool {
		obj, ok, _ := h.reg.crds.GetIndexer().GetByKey("webapps.apps.example.com")
		return ok && obj != nil
	})
	if got := h.reg.Parent(webappGVR).Informers[""]; got != before || told() != 1 {
		t.Fatalf("a CRD update of the same generation replaced the informers (%v) or told the handler again (%d times)", got != before, told())
	}

	update(2)
	h.eventually("fresh informers swapped in after the schema change", func() bool {
		entry := h.reg.Parent(webappGVR)
		return entry.Informers[""] != before && entry.Running()
	})
	h.eventually("the handler told of the WebApp again by the fresh informer", func() bool { return told() == 2 })
	// The fresh informer watches: a WebApp created now reaches the handler.
	h.create(webappGVR, webapp("ns", "b"))
	h.eventually("the parent handler is told of the new WebApp", func() bool { return h.rec.told(webappGVR, "ns/b") })
}
