package registry

import (
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestRegistryServesResourceOnceItsCRDAppears(t *testing.T) {
	cfg, sets := testConfig(t, entries{})
	h := startRegistry(t, cfg, sets, webapp("ns", "a"))
	if entry := h.reg.Parent(webappGVR); entry == nil || entry.Served || entry.Running() {
		t.Fatalf("webapps entry = %+v before its CRD exists, want configured, not served, no informer running", entry)
	}
	if served, told := h.rec.servedAs("webapps.apps.example.com"); served || !told {
		t.Fatalf("Served hook: served %v (told %v) before the CRD exists, want told it is not served", served, told)
	}

	h.create(CRDResource, crdObject("webapps", "apps.example.com", "WebApp", "v1beta1"))
	h.eventually("webapps is served", func() bool { return h.served(webappGVR) })
	if served, _ := h.rec.servedAs("webapps.apps.example.com"); !served {
		t.Error("Served hook not told that webapps is served")
	}
	if g, ok := h.reg.servedBy(schema.GroupKind{Group: "apps.example.com", Kind: "WebApp"}); !ok || g != webappGVR {
		t.Errorf("byKind[WebApp] = %v, %v; want %v (owner references resolve to it)", g, ok, webappGVR)
	}
	h.eventually("the parent handler is told of the existing WebApp", func() bool { return h.rec.told(webappGVR, "ns/a") })
}

func TestRegistryStopsServingResourceWhoseCRDIsDeletedOthersUndisturbed(t *testing.T) {
	cfg, sets := testConfig(t, entries{gizmos: true})
	h := startRegistry(t, cfg, sets,
		crdObject("webapps", "apps.example.com", "WebApp", "v1beta1"), crdObject("gizmos", "toys.example.com", "Gizmo", "v1"),
		webapp("ns", "a"), gizmo("ns", "g"))
	h.eventually("both resources are served and watched", func() bool {
		return h.served(webappGVR) && h.served(gizmoGVR) && h.api.watching(webappGVR) > 0 && h.api.watching(gizmoGVR) > 0
	})
	webapps := h.reg.Parent(webappGVR)

	must(t, h.api.Resource(CRDResource).Delete(h.ctx, "gizmos.toys.example.com", metav1.DeleteOptions{}))
	h.eventually("gizmos is no longer served", func() bool { return !h.served(gizmoGVR) })
	if served, _ := h.rec.servedAs("gizmos.toys.example.com"); served {
		t.Error("Served hook not told that gizmos is no longer served")
	}
	if entry := h.reg.Parent(gizmoGVR); entry == nil || entry.Running() {
		t.Errorf("gizmos entry = %+v, want kept in the config with its informers stopped", entry)
	}
	if g, ok := h.reg.servedBy(schema.GroupKind{Group: "toys.example.com", Kind: "Gizmo"}); ok {
		t.Errorf("byKind[Gizmo] = %v after its CRD was deleted, want none", g)
	}
	if removed := h.rec.removedLabels(); len(removed) != 0 {
		t.Errorf("Removed hook told of %v: a deleted CRD does not remove an entry from the config", removed)
	}
	if got := h.reg.Parent(webappGVR); got.Informers[""] != webapps.Informers[""] || !h.served(webappGVR) {
		t.Error("webapps informers replaced or stopped when another CRD went away")
	}
	// The webapps watch still runs: a new WebApp reaches its handler.
	h.create(webappGVR, webapp("ns", "b"))
	h.eventually("the parent handler is told of the new WebApp", func() bool { return h.rec.told(webappGVR, "ns/b") })
}

// TestRegistryStopsServingResourceWhoseCRDStopsServingItsVersion: the
// Gizmo CRD stops serving the configured v1 (v2 only): gizmos stops,
// webapps is undisturbed; v1 served again, gizmos is watched anew and a
// Gizmo created then reaches its handler.
func TestRegistryStopsServingResourceWhoseCRDStopsServingItsVersion(t *testing.T) {
	cfg, sets := testConfig(t, entries{gizmos: true})
	h := startRegistry(t, cfg, sets,
		crdObject("webapps", "apps.example.com", "WebApp", "v1beta1"), crdObject("gizmos", "toys.example.com", "Gizmo", "v1"),
		webapp("ns", "a"), gizmo("ns", "g"))
	h.eventually("both resources are served", func() bool { return h.served(webappGVR) && h.served(gizmoGVR) })
	webapps := h.reg.Parent(webappGVR)
	gizmoKind := schema.GroupKind{Group: "toys.example.com", Kind: "Gizmo"}

	serve := func(versions ...any) {
		t.Helper()
		crd, err := h.api.Resource(CRDResource).Get(h.ctx, "gizmos.toys.example.com", metav1.GetOptions{})
		must(t, err)
		must(t, unstructured.SetNestedSlice(crd.Object, versions, "spec", "versions"))
		crd.SetResourceVersion(fmt.Sprint(h.api.rv.Add(1)))
		_, err = h.api.Resource(CRDResource).Update(h.ctx, crd, metav1.UpdateOptions{})
		must(t, err)
	}
	serve(map[string]any{"name": "v1", "served": false}, map[string]any{"name": "v2", "served": true})
	h.eventually("gizmos is no longer served", func() bool { return !h.served(gizmoGVR) })
	if served, _ := h.rec.servedAs("gizmos.toys.example.com"); served {
		t.Error("Served hook not told that gizmos is no longer served")
	}
	if _, ok := h.reg.servedBy(gizmoKind); ok {
		t.Error("byKind still resolves Gizmo once its version is no longer served")
	}
	if got := h.reg.Parent(webappGVR); got.Informers[""] != webapps.Informers[""] || !h.served(webappGVR) {
		t.Error("webapps informers replaced or stopped when another CRD stopped serving a version")
	}

	before := h.api.watching(gizmoGVR)
	serve(map[string]any{"name": "v1", "served": true}, map[string]any{"name": "v2", "served": true})
	h.eventually("gizmos is served again, with a new watch", func() bool { return h.served(gizmoGVR) && h.api.watching(gizmoGVR) > before })
	if g, ok := h.reg.servedBy(gizmoKind); !ok || g != gizmoGVR {
		t.Errorf("byKind[Gizmo] = %v, %v once served again; want %v", g, ok, gizmoGVR)
	}
	h.create(gizmoGVR, gizmo("ns", "h"))
	h.eventually("the parent handler is told of the new Gizmo", func() bool { return h.rec.told(gizmoGVR, "ns/h") })
}
