package reconcile

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/record"

	"stencil.dev/stencil/contract"
	"stencil.dev/stencil/controller/reconcile/status"
	"stencil.dev/stencil/templates"
)

// The cluster seam. A sync reads through the registry (the caches, with
// stencil's own writes the caches have not shown yet put in) and a GET
// where a cache cannot tell, and acts through a Writer. The controller's
// Writer sends each write to the API server; "stencil diff" (package
// plan) runs the same Sync over a registry of its own, with a Writer that
// asks the API server for a dry run of each write and records it. Every
// decision is Sync's, so the plan and the controller's writes cannot
// disagree: there is one decision path, run with two writers.

// Writer is how a sync acts on the cluster. Every write names the custom
// resource it is made for (parent), so a recording writer can report it.
// Children are written through As, as the entry's identity; the parent's
// status and events are stencil's own.
type Writer interface {
	// As returns the writer of children as user, the identity an entry
	// names ("system:serviceaccount:NS:NAME"), or as stencil's own account
	// for "". It makes no request.
	As(user string) (ChildWriter, error)
	// PatchStatus merge-patches parent's status subresource.
	PatchStatus(ctx context.Context, gvr schema.GroupVersionResource, parent *unstructured.Unstructured, patch []byte) (*unstructured.Unstructured, error)
	// PatchParent JSON-patches the resource itself (only to release a
	// finalizer of a controller stencil replaced); the patch's own test
	// operation makes it fail rather than overwrite a change made since.
	PatchParent(ctx context.Context, gvr schema.GroupVersionResource, parent *unstructured.Unstructured, patch []byte) error
	// Event records an event on parent.
	Event(parent *unstructured.Unstructured, eventtype, reason, message string)
	// Synced is told where each sync came to, once per sync that renders
	// or is held by a rollout, before the status is patched (which sends
	// only what differs from the live status).
	Synced(Outcome)
}

// ChildWriter writes the children of a resource, as one identity.
type ChildWriter interface {
	// Create creates a child no object is known to hold the name of: a
	// server-side apply that is not forced, so that a foreign object of
	// that name created meanwhile fails it with a conflict.
	Create(ctx context.Context, parent *unstructured.Unstructured, gvr schema.GroupVersionResource, want *unstructured.Unstructured) (*unstructured.Unstructured, error)
	// Apply corrects a child stencil controls: a forced server-side apply.
	// The result carries live's resourceVersion when nothing changed.
	Apply(ctx context.Context, parent *unstructured.Unstructured, gvr schema.GroupVersionResource, want *unstructured.Unstructured) (*unstructured.Unstructured, error)
	// DryRun asks what Apply would make of the object (want carries its
	// applied hash already), persisting nothing.
	DryRun(ctx context.Context, gvr schema.GroupVersionResource, want *unstructured.Unstructured) (*unstructured.Unstructured, error)
	// Delete prunes a child, on the condition that it is still the object
	// of that UID.
	Delete(ctx context.Context, parent *unstructured.Unstructured, gvr schema.GroupVersionResource, child *unstructured.Unstructured) error
}

// Outcome is where one sync of a resource came to.
type Outcome struct {
	// Key and Parent name the resource, as the sync read it.
	Key    Key
	Parent *unstructured.Unstructured
	// Render is what the templates rendered; nil when the render failed
	// or did not run.
	Render *templates.Result
	// Status is what the resource's status reports.
	Status status.Outcome
	// Unchanged counts the rendered children found in sync.
	Unchanged int
	// Held, when set, says why a rollout, or the stencil.dev/paused
	// annotation (Paused), leaves the resource as it is.
	Held   string
	Paused bool
}

// apiWriter is the controller's Writer: every write goes to the API server.
type apiWriter struct {
	client   dynamic.Interface
	recorder record.EventRecorder
	// impersonate returns the client that writes as a user; nil: no
	// identity can be written as.
	impersonate func(user string) (dynamic.Interface, error)
}

// As implements Writer: stencil's own client for "", else the shared
// client that impersonates user. Without one, an entry's identity is an
// error: never a write as stencil's own account instead.
func (w apiWriter) As(user string) (ChildWriter, error) {
	if user == "" {
		return childWriter{client: w.client}, nil
	}
	if w.impersonate == nil {
		return nil, fmt.Errorf("writing as %s: this stencil has no impersonating client", user)
	}
	client, err := w.impersonate(user)
	if err != nil {
		return nil, fmt.Errorf("writing as %s: %w", user, err)
	}
	return childWriter{client: client}, nil
}

// childWriter is the controller's ChildWriter, through one client.
type childWriter struct {
	client dynamic.Interface
}

// Create implements ChildWriter.
func (w childWriter) Create(ctx context.Context, _ *unstructured.Unstructured, gvr schema.GroupVersionResource, want *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	return w.client.Resource(gvr).Namespace(want.GetNamespace()).Apply(ctx, want.GetName(), want, metav1.ApplyOptions{FieldManager: contract.FieldManager})
}

// Apply implements ChildWriter.
func (w childWriter) Apply(ctx context.Context, _ *unstructured.Unstructured, gvr schema.GroupVersionResource, want *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	return w.client.Resource(gvr).Namespace(want.GetNamespace()).Apply(ctx, want.GetName(), want, metav1.ApplyOptions{FieldManager: contract.FieldManager, Force: true})
}

// DryRun implements ChildWriter.
func (w childWriter) DryRun(ctx context.Context, gvr schema.GroupVersionResource, want *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	return dryRunApply(ctx, w.client.Resource(gvr).Namespace(want.GetNamespace()), want)
}

// Delete implements ChildWriter.
func (w childWriter) Delete(ctx context.Context, _ *unstructured.Unstructured, gvr schema.GroupVersionResource, child *unstructured.Unstructured) error {
	uid := child.GetUID()
	return w.client.Resource(gvr).Namespace(child.GetNamespace()).Delete(ctx, child.GetName(),
		metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
}

// PatchStatus implements Writer.
func (w apiWriter) PatchStatus(ctx context.Context, gvr schema.GroupVersionResource, parent *unstructured.Unstructured, patch []byte) (*unstructured.Unstructured, error) {
	return w.client.Resource(gvr).Namespace(parent.GetNamespace()).
		Patch(ctx, parent.GetName(), types.MergePatchType, patch, metav1.PatchOptions{FieldManager: contract.FieldManager}, "status")
}

// PatchParent implements Writer.
func (w apiWriter) PatchParent(ctx context.Context, gvr schema.GroupVersionResource, parent *unstructured.Unstructured, patch []byte) error {
	_, err := w.client.Resource(gvr).Namespace(parent.GetNamespace()).
		Patch(ctx, parent.GetName(), types.JSONPatchType, patch, metav1.PatchOptions{FieldManager: contract.FieldManager})
	return err
}

// Event implements Writer.
func (w apiWriter) Event(parent *unstructured.Unstructured, eventtype, reason, message string) {
	w.recorder.Event(parent, eventtype, reason, message)
}

// Synced implements Writer: the controller reports through the status.
func (apiWriter) Synced(Outcome) {}

// warning records a Warning event through the writer.
func (c *Reconciler) warning(parent *unstructured.Unstructured, reason, message string) {
	c.writer.Event(parent, corev1.EventTypeWarning, reason, message)
}
