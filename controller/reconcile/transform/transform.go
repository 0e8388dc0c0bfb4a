package transform

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"stencil.dev/stencil/contract"
	"stencil.dev/stencil/controller/reconcile/drift"
)

const annotationLastApplied = "kubectl.kubernetes.io/last-applied-configuration"

// readinessSpec are the spec fields kstatus reads (sigs.k8s.io/cli-utils
// pkg/kstatus/status/core.go: replicas, update strategy and progress
// deadline of workloads, a Job's parallelism and completions, a Service's
// type and cluster IP); a cached child keeps only these of its spec.
var readinessSpec = map[string]bool{
	"replicas": true, "updateStrategy": true, "progressDeadlineSeconds": true,
	"parallelism": true, "completions": true, "type": true, "clusterIP": true,
}

// conditionTimes are the timestamps of status conditions: readiness reads
// a condition's type, status, reason and message, never when it changed.
var conditionTimes = []string{"lastTransitionTime", "lastUpdateTime", "lastProbeTime", "lastHeartbeatTime"}

// Lean is the transform of the child informers for children no template
// reads: the few fields stencil itself reads (see the package doc).
func Lean(obj any) (any, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return obj, nil
	}
	keepAnnotations(u, contract.AnnotationAppliedHash, contract.AnnotationTemplateRevision)
	drift.CompactManagedFields(u)
	if spec, ok := u.Object["spec"].(map[string]any); ok {
		for k := range spec {
			if !readinessSpec[k] {
				delete(spec, k)
			}
		}
	}
	if st, ok := u.Object["status"].(map[string]any); ok {
		conds, _ := st["conditions"].([]any)
		for _, c := range conds {
			if m, ok := c.(map[string]any); ok {
				for _, k := range conditionTimes {
					delete(m, k)
				}
			}
		}
	}
	// Top-level content outside spec and status (a ConfigMap's or Secret's
	// data, a PDB's nothing, an RBAC object's rules) is never read either.
	for k := range u.Object {
		switch k {
		case "apiVersion", "kind", "metadata", "spec", "status":
		default:
			delete(u.Object, k)
		}
	}
	u.Object[leanKey] = true
	return u, nil
}

// leanKey marks a child cached by Lean: a template that reads it
// (observed) needs the whole object, and the reconciler reads it from the
// API server instead. It is never sent anywhere: only apply responses and
// the API server's objects are written from.
const leanKey = "__stencil_lean"

// Whole is the transform of the children of an entry whose
// templates read their live children (templates.Set.ReadsLive): whole,
// as templates see them (observed), but for what no template may read
// (a Secret's data) and what stencil never reads (the last-applied
// annotation); managedFields are kept as text, as in every cache.
func Whole(u *unstructured.Unstructured) *unstructured.Unstructured {
	dropLastApplied(u)
	if u.GetKind() == "Secret" && u.GroupVersionKind().Group == "" {
		delete(u.Object, "data")
		delete(u.Object, "stringData")
	}
	drift.CompactManagedFields(u)
	return u
}

// Parent is the transform of the custom resource informers: stencil
// reads its own status entry of managedFields (statusFieldsOf), not the
// entries of other writers.
func Parent(obj any) (any, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return obj, nil
	}
	dropLastApplied(u)
	// In place: NestedSlice would deep-copy every entry on each event.
	if md, ok := u.Object["metadata"].(map[string]any); ok {
		if entries, ok := md["managedFields"].([]any); ok {
			kept := entries[:0]
			for _, e := range entries {
				if m, ok := e.(map[string]any); ok && m["manager"] == contract.FieldManager {
					kept = append(kept, e)
				}
			}
			md["managedFields"] = kept
		}
	}
	drift.CompactManagedFields(u)
	return u, nil
}

// keepAnnotations drops every annotation of u but keep: a child's other
// annotations (its template's, other controllers') are nothing stencil
// reads from the cache.
func keepAnnotations(u *unstructured.Unstructured, keep ...string) {
	a := u.GetAnnotations()
	if len(a) == 0 {
		return
	}
	kept := map[string]string{}
	for _, k := range keep {
		if v, ok := a[k]; ok {
			kept[k] = v
		}
	}
	if len(kept) == len(a) {
		return
	}
	if len(kept) == 0 {
		kept = nil
	}
	u.SetAnnotations(kept)
}

func dropLastApplied(u *unstructured.Unstructured) {
	if a := u.GetAnnotations(); a != nil {
		if _, ok := a[annotationLastApplied]; ok {
			delete(a, annotationLastApplied)
			u.SetAnnotations(a)
		}
	}
}

// IsLean reports whether u was cached by Lean.
func IsLean(u *unstructured.Unstructured) bool {
	_, lean := u.Object[leanKey]
	return lean
}
