package registry

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
)

func TestClusterScopedChildKindIsRefusedOnceAndAReloadAddingOneIsRefused(t *testing.T) {
	cfg, sets := testConfig(t, entries{configMapChild: true})
	h := newHarness(t)
	// A ConfigMap that the mapper says is cluster-scoped stands in for any
	// cluster-scoped kind.
	h.mapper.Add(configMapGVK, meta.RESTScopeRoot)
	h.build(cfg, sets)
	if waiting, refused := h.reg.kindState(configMapGVK); !refused || waiting || h.reg.Child(configMapGVK) != nil {
		t.Fatalf("ConfigMap: refused %v, waiting %v, child %v; want refused only", refused, waiting, h.reg.Child(configMapGVK))
	}
	// Refused kinds are not looked up again on CRD events: looked up, it
	// would now be served.
	h.mapper.Add(configMapGVK, meta.RESTScopeNamespace)
	h.reg.resolveWaiting(h.ctx)
	if _, refused := h.reg.kindState(configMapGVK); !refused || h.reg.Child(configMapGVK) != nil {
		t.Error("a refused child kind was looked up again")
	}

	// A running config without it: a reload that adds it is refused.
	small, smallSets := testConfig(t, entries{})
	h2 := newHarness(t)
	h2.mapper.Add(configMapGVK, meta.RESTScopeRoot)
	h2.build(small, smallSets)
	before := h2.reg.Parent(webappGVR)
	_, err := h2.reg.Reconfigure(h2.ctx, cfg, sets, nil)
	if err == nil || !strings.Contains(err.Error(), "ConfigMap") || !strings.Contains(err.Error(), "cluster-scoped") {
		t.Fatalf("Reconfigure = %v, want an error naming the cluster-scoped ConfigMap", err)
	}
	if _, refused := h2.reg.kindState(configMapGVK); h2.reg.Parent(webappGVR) != before || refused {
		t.Error("a refused reload changed the registry")
	}
}
