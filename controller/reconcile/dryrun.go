package reconcile

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/klog/v2"

	"stencil.dev/stencil/contract"
	"stencil.dev/stencil/controller/reconcile/drift"
	"stencil.dev/stencil/controller/registry"
)

// The dry run: what field ownership cannot tell (drift.Unowned) is asked
// of the API server itself, and the answer remembered.

// serverAgrees asks the API server, with a dry-run apply (through w, as
// the entry's identity) that persists nothing, whether applying want to live would change the object. It is
// used only where field ownership cannot tell (a field of the render that no
// manager holds), and its answer is remembered per resourceVersion.
func (c *Reconciler) serverAgrees(ctx context.Context, w ChildWriter, childKind *registry.Child, want, live *unstructured.Unstructured, hash string) bool {
	version := live.GetResourceVersion() + "/" + hash
	if c.memory.DryRuns.Has(live.GetUID(), version) {
		return true
	}
	c.opts.Metrics.dryRuns.WithLabelValues(childKind.GVK.Kind).Inc()
	client := c.opts.Dynamic.Resource(childKind.GVR).Namespace(want.GetNamespace())
	// The cache holds a stripped child (package transform): compare with the
	// whole object.
	whole, err := client.Get(ctx, want.GetName(), metav1.GetOptions{})
	if err != nil {
		klog.FromContext(ctx).V(2).Info("Reading child for a dry run failed", "kind", want.GetKind(), "child", klog.KObj(want), "err", err)
		return false
	}
	result, err := w.DryRun(ctx, childKind.GVR, want)
	if err != nil {
		// The real apply will meet the same error and report it.
		klog.FromContext(ctx).V(2).Info("Dry-run apply failed", "kind", want.GetKind(), "child", klog.KObj(want), "err", err)
		return false
	}
	if !sameJSON(comparable(result), comparable(whole)) {
		return false
	}
	c.memory.DryRuns.Set(live.GetUID(), version)
	return true
}

// DryRunApply asks the API server what applying want would make of the
// object, persisting nothing: the forced server-side apply that sync makes,
// as field manager stencil, with the applied-hash annotation stamped on a
// copy of want, and dryRun=All. "stencil diff" uses it so that its plan and
// the controller's writes cannot disagree.
func DryRunApply(ctx context.Context, client dynamic.ResourceInterface, want *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	want = want.DeepCopy()
	if _, err := drift.StampHash(want); err != nil {
		return nil, err
	}
	return dryRunApply(ctx, client, want)
}

// dryRunApply is DryRunApply for a render already stamped with its hash.
func dryRunApply(ctx context.Context, client dynamic.ResourceInterface, want *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	return client.Apply(ctx, want.GetName(), want, metav1.ApplyOptions{FieldManager: contract.FieldManager, Force: true, DryRun: []string{metav1.DryRunAll}})
}

// comparable strips what an apply result differs in without the object
// changing: bookkeeping metadata and status.
func comparable(u *unstructured.Unstructured) map[string]any {
	out := runtime.DeepCopyJSON(u.Object)
	delete(out, "status")
	if md, ok := out["metadata"].(map[string]any); ok {
		for _, k := range []string{"managedFields", "resourceVersion", "generation", "creationTimestamp"} {
			delete(md, k)
		}
	}
	return out
}
