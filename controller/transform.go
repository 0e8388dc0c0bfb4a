package controller

import (
	"encoding/json"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Lean caches: the informers keep only what stencil reads. Drift is decided
// from the applied hash and managedFields, never by comparing values, so a
// child's spec is not needed in the cache, except the few fields readiness
// (kstatus) reads; pod templates, ConfigMap and Secret data, and the
// last-applied annotation of kubectl go. A custom resource keeps its spec
// (it is rendered) but only stencil's own managedFields entries. The rare
// path that needs a whole child (the dry-run comparison) reads it from the
// API server.

const annotationLastApplied = "kubectl.kubernetes.io/last-applied-configuration"

// stripChild is the transform of the child informers.
func stripChild(obj any) (any, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return obj, nil
	}
	dropLastApplied(u)
	compactManagedFields(u)
	gk := u.GroupVersionKind().GroupKind()
	switch gk.String() {
	case "Deployment.apps", "StatefulSet.apps", "DaemonSet.apps", "ReplicaSet.apps", "Job.batch":
		// kstatus reads replicas, strategies and counts, never the pods.
		unstructured.RemoveNestedField(u.Object, "spec", "template")
	case "CronJob.batch":
		unstructured.RemoveNestedField(u.Object, "spec", "jobTemplate")
	case "ConfigMap", "Secret":
		delete(u.Object, "data")
		delete(u.Object, "binaryData")
		delete(u.Object, "stringData")
	}
	return u, nil
}

// stripParent is the transform of the custom resource informers: stencil
// reads its own status entry of managedFields (statusFieldsOf), not the
// entries of other writers.
func stripParent(obj any) (any, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return obj, nil
	}
	dropLastApplied(u)
	entries, _, _ := unstructured.NestedSlice(u.Object, "metadata", "managedFields")
	kept := entries[:0]
	for _, e := range entries {
		if m, ok := e.(map[string]any); ok && m["manager"] == FieldManager {
			kept = append(kept, e)
		}
	}
	if len(kept) != len(entries) {
		_ = unstructured.SetNestedSlice(u.Object, kept, "metadata", "managedFields")
	}
	compactManagedFields(u)
	return u, nil
}

// compactManagedFields keeps each managedFields entry's field set as its
// JSON text instead of a tree of maps: a set is decoded only when drift or
// status needs it (fieldSetOf), and as a tree it is most of what a cached
// child weighs. Read the entries back with managedFieldsOf, not
// GetManagedFields.
func compactManagedFields(u *unstructured.Unstructured) {
	md, _ := u.Object["metadata"].(map[string]any)
	entries, _ := md["managedFields"].([]any)
	for _, e := range entries {
		m, ok := e.(map[string]any)
		if !ok {
			continue
		}
		if set, ok := m["fieldsV1"].(map[string]any); ok {
			if raw, err := json.Marshal(set); err == nil {
				m["fieldsV1"] = string(raw)
			}
		}
	}
}

// managedFieldsOf returns the managedFields of u, whether its field sets are
// trees (as the API server sends them) or text (as the caches keep them).
// An entry that does not decode is left out, which can only make stencil
// apply once more, never skip a needed write.
func managedFieldsOf(u *unstructured.Unstructured) []metav1.ManagedFieldsEntry {
	md, _ := u.Object["metadata"].(map[string]any)
	entries, _ := md["managedFields"].([]any)
	out := make([]metav1.ManagedFieldsEntry, 0, len(entries))
	for _, e := range entries {
		m, ok := e.(map[string]any)
		if !ok {
			continue
		}
		var entry metav1.ManagedFieldsEntry
		entry.Manager, _ = m["manager"].(string)
		op, _ := m["operation"].(string)
		entry.Operation = metav1.ManagedFieldsOperationType(op)
		entry.APIVersion, _ = m["apiVersion"].(string)
		entry.Subresource, _ = m["subresource"].(string)
		entry.FieldsType, _ = m["fieldsType"].(string)
		switch set := m["fieldsV1"].(type) {
		case string:
			entry.FieldsV1 = &metav1.FieldsV1{Raw: []byte(set)}
		case map[string]any:
			raw, err := json.Marshal(set)
			if err != nil {
				continue
			}
			entry.FieldsV1 = &metav1.FieldsV1{Raw: raw}
		}
		out = append(out, entry)
	}
	return out
}

func dropLastApplied(u *unstructured.Unstructured) {
	if a := u.GetAnnotations(); a != nil {
		if _, ok := a[annotationLastApplied]; ok {
			delete(a, annotationLastApplied)
			u.SetAnnotations(a)
		}
	}
}
