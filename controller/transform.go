package controller

import (
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
	entries := u.GetManagedFields()
	kept := entries[:0]
	for _, e := range entries {
		if e.Manager == FieldManager {
			kept = append(kept, e)
		}
	}
	if len(kept) != len(entries) {
		u.SetManagedFields(kept)
	}
	return u, nil
}

func dropLastApplied(u *unstructured.Unstructured) {
	if a := u.GetAnnotations(); a != nil {
		if _, ok := a[annotationLastApplied]; ok {
			delete(a, annotationLastApplied)
			u.SetAnnotations(a)
		}
	}
}
