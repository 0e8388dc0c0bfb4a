package registry

import (
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"

	"stencil.dev/stencil/gvr"
)

// CRDResource is the resource of the CRD objects the registry watches.
var CRDResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// crdKey is the cache key of res's CRD: its name is always <plural>.<group>.
func crdKey(res gvr.Resource) string { return res.Resource + "." + res.Group }

// ServedKind looks res up in crds, a cache of CRDs stripped by StripCRD:
// the Kind its CRD serves at res's version, and whether the CRD is
// Established, not being deleted, and serves that version.
func ServedKind(crds cache.Store, res gvr.Resource) (string, bool) {
	obj, exists, err := crds.GetByKey(crdKey(res))
	if err != nil || !exists {
		return "", false
	}
	crd, ok := obj.(*unstructured.Unstructured)
	if !ok || !isEstablished(crd) || crd.GetDeletionTimestamp() != nil {
		// A CRD being deleted takes its custom resources with it: stop
		// before its watches break.
		return "", false
	}
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	for _, v := range versions {
		m, _ := v.(map[string]any)
		if m["name"] == res.Version && m["served"] == true {
			kind, _, _ := unstructured.NestedString(crd.Object, "spec", "names", "kind")
			return kind, kind != ""
		}
	}
	return "", false
}

// StatusSchema returns, from crds (stripped by StripCRD), the status schema
// of res's CRD at its version, and whether there is one to prune by.
func StatusSchema(crds cache.Store, res gvr.Resource) (map[string]any, bool) {
	obj, exists, err := crds.GetByKey(crdKey(res))
	if err != nil || !exists {
		return nil, false
	}
	crd, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return nil, false
	}
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	for _, v := range versions {
		m, _ := v.(map[string]any)
		if m["name"] == res.Version {
			s, ok := m["statusSchema"].(map[string]any)
			return s, ok
		}
	}
	return nil, false
}

func isEstablished(crd *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
	for _, cond := range conds {
		m, _ := cond.(map[string]any)
		if m["type"] == "Established" {
			return m["status"] == "True"
		}
	}
	return false
}

// StripCRD, an informer transform, keeps the few fields of a CRD the
// registry reads: a CRD's schema can be hundreds of kilobytes, and a
// cluster may hold hundreds of CRDs. Of the schema it keeps each version's
// status schema (see statusSchemaOf).
func StripCRD(obj any) (any, error) {
	crd, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return obj, nil
	}
	var versions []any
	vs, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	for _, v := range vs {
		if m, ok := v.(map[string]any); ok {
			// The transform may see an object it already stripped (client-go
			// asks it to be idempotent): keep what it kept then.
			schema, stripped := m["statusSchema"]
			if !stripped {
				schema = statusSchemaOf(m)
			}
			versions = append(versions, map[string]any{"name": m["name"], "served": m["served"], "statusSchema": schema})
		}
	}
	kind, _, _ := unstructured.NestedString(crd.Object, "spec", "names", "kind")
	conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
	var established []any
	for _, cond := range conds {
		if m, _ := cond.(map[string]any); m["type"] == "Established" {
			established = append(established, map[string]any{"type": m["type"], "status": m["status"]})
		}
	}
	md := map[string]any{"name": crd.GetName(), "resourceVersion": crd.GetResourceVersion(), "uid": string(crd.GetUID())}
	if ts := crd.GetDeletionTimestamp(); ts != nil {
		md["deletionTimestamp"] = ts.UTC().Format(time.RFC3339)
	}
	out := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": crd.GetAPIVersion(), "kind": crd.GetKind(),
		"metadata": md,
		"spec":     map[string]any{"names": map[string]any{"kind": kind}, "versions": versions},
		"status":   map[string]any{"conditions": established},
	}}
	return out, nil
}
