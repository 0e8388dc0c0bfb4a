package reconcile

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/klog/v2"

	"stencil.dev/stencil/controller/registry"
)

// Moving from helm-operator (docs/charts.md): a resource helm-operator
// served carries its uninstall finalizer, which only helm-operator
// removes. With stencil serving the resource instead, deleting it would
// hang. stencil releases that finalizer when the resource is deleted, not
// when it takes the resource over: the way back to helm-operator then
// finds every resource as helm-operator left it, and a takeover writes
// nothing to the resource itself. What the finalizer guarded, helm
// uninstall, is the garbage collector's work here: the children carry
// the resource's ownerReference (stencil's and helm-operator's alike),
// and so do helm-operator-plugins' release Secrets.

// helmOperatorFinalizers are the uninstall finalizers helm-operator sets:
// helm-operator-plugins' (and operator-sdk's legacy name), and
// operator-sdk's helm operator's.
var helmOperatorFinalizers = []string{"uninstall-helm-release", "helm.sdk.operatorframework.io/uninstall-release"}

// releaseHelmFinalizer removes helm-operator's finalizer from parent, a
// chart entry's resource being deleted. The JSON patch tests the list it
// replaces, so a finalizer another controller added or removed meanwhile
// fails it (and the next sync, from the cache, tries again) rather than
// being overwritten.
func (c *Reconciler) releaseHelmFinalizer(ctx context.Context, entry *registry.Parent, parent *unstructured.Unstructured) error {
	if entry.Res.Chart == "" {
		return nil
	}
	finalizers := parent.GetFinalizers()
	keep := slices.DeleteFunc(slices.Clone(finalizers), func(f string) bool { return slices.Contains(helmOperatorFinalizers, f) })
	if len(keep) == len(finalizers) {
		return nil
	}
	if keep == nil {
		keep = []string{}
	}
	patch, err := json.Marshal([]map[string]any{
		{"op": "test", "path": "/metadata/finalizers", "value": finalizers},
		{"op": "replace", "path": "/metadata/finalizers", "value": keep},
	})
	if err != nil {
		return fmt.Errorf("encoding the finalizers' patch: %w", err)
	}
	if err := c.mayWrite(parent.GetNamespace()); err != nil {
		return err
	}
	if err := c.writer.PatchParent(ctx, entry.Res.GVR(), parent, patch); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("releasing helm-operator's finalizer of a deleted resource: %w", err)
	}
	klog.FromContext(ctx).Info("Released helm-operator's finalizer: the resource is deleted, and its children with it", "finalizers", keep)
	return nil
}
