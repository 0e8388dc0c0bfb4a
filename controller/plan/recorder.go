package plan

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"stencil.dev/stencil/contract"
	"stencil.dev/stencil/controller/reconcile"
	"stencil.dev/stencil/controller/reconcile/status"
	"stencil.dev/stencil/controller/registry"
)

// recorder is the plan's reconcile.Writer: each write Sync decides is
// asked of the API server as a dry run and recorded, never sent. Reads
// (the live object a change is shown against) are GETs.
type recorder struct {
	client dynamic.Interface
	// impersonate returns the client that dry-runs as an entry's
	// identity; nil dry-runs every write as the plan's own user.
	impersonate func(user string) (dynamic.Interface, error)

	mu sync.Mutex
	// resources names each served entry's resource by its kind, for the
	// report's parent references.
	resources map[schema.GroupKind]string
	// byParent holds what each resource's sync came to, by its UID.
	byParent map[types.UID]*diffResult
	// outcomes holds the keys a sync reported an outcome for.
	outcomes map[reconcile.Key]types.UID
}

// diffResult is what one resource contributes to the report.
type diffResult struct {
	children  []childDiff
	unchanged int
	failures  []failure
	waiting   []waiting
	held      []waiting
}

func newRecorder(client dynamic.Interface, impersonate func(string) (dynamic.Interface, error)) *recorder {
	return &recorder{client: client, impersonate: impersonate, resources: map[schema.GroupKind]string{},
		byParent: map[types.UID]*diffResult{}, outcomes: map[reconcile.Key]types.UID{}}
}

// served learns an entry's resource name for its kind.
func (r *recorder) served(entry *registry.Parent) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.resources[entry.GVK.GroupKind()] = entry.Res.Resource
}

// ref names parent in the report.
func (r *recorder) ref(parent *unstructured.Unstructured) parentRef {
	r.mu.Lock()
	defer r.mu.Unlock()
	return parentRef{Resource: r.resources[parent.GroupVersionKind().GroupKind()], Namespace: parent.GetNamespace(), Name: parent.GetName()}
}

// add records a child's planned change under parent.
func (r *recorder) add(parent *unstructured.Unstructured, c childDiff) {
	c.Parent = r.ref(parent)
	r.mu.Lock()
	defer r.mu.Unlock()
	res := r.result(parent.GetUID())
	res.children = append(res.children, c)
}

// result returns parent's result, creating it. Called under mu.
func (r *recorder) result(uid types.UID) *diffResult {
	res := r.byParent[uid]
	if res == nil {
		res = &diffResult{}
		r.byParent[uid] = res
	}
	return res
}

// As implements reconcile.Writer: the dry runs of an entry with an
// identity impersonate it, as the controller's writes do, so that the plan
// shows what the identity would be refused (Forbidden).
func (r *recorder) As(user string) (reconcile.ChildWriter, error) {
	if user == "" || r.impersonate == nil {
		return childRecorder{recorder: r, client: r.client}, nil
	}
	client, err := r.impersonate(user)
	if err != nil {
		return nil, fmt.Errorf("dry-running as %s: %w", user, err)
	}
	return childRecorder{recorder: r, client: client}, nil
}

// childRecorder is the recorder's ChildWriter: dry runs through one
// client (the plan's own, or one impersonating an identity), recorded by
// the recorder. Live objects are read with the plan's own client.
type childRecorder struct {
	*recorder
	client dynamic.Interface
}

// Create implements reconcile.ChildWriter: a dry-run create, recorded.
func (r childRecorder) Create(ctx context.Context, parent *unstructured.Unstructured, gvr schema.GroupVersionResource, want *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	created, err := r.client.Resource(gvr).Namespace(want.GetNamespace()).Apply(ctx, want.GetName(), want,
		metav1.ApplyOptions{FieldManager: contract.FieldManager, DryRun: []string{metav1.DryRunAll}})
	if err != nil {
		return nil, err
	}
	r.add(parent, childDiff{Kind: want.GetKind(), Namespace: want.GetNamespace(), Name: want.GetName(), Action: actionCreate})
	return created, nil
}

// Apply implements reconcile.ChildWriter: a dry-run apply, recorded with the
// fields it would change. A result that changes nothing carries the live
// resourceVersion, as the API server's answer to a no-op apply does, so
// Sync counts the child unchanged.
func (r childRecorder) Apply(ctx context.Context, parent *unstructured.Unstructured, gvr schema.GroupVersionResource, want *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	live, err := r.recorder.client.Resource(gvr).Namespace(want.GetNamespace()).Get(ctx, want.GetName(), metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("reading %s/%s: %w", want.GetKind(), want.GetName(), err)
	}
	result, err := r.DryRun(ctx, gvr, want)
	if err != nil {
		return nil, err
	}
	// The revision annotation an earlier stencil left on a child goes with
	// its next write; the controller does not write for it (the applied
	// hash still matches), so it is no change to review. Where the
	// controller stamps the revision on children, it is one.
	_, stamped := want.GetAnnotations()[contract.AnnotationTemplateRevision]
	changes := objectChanges(live.Object, result.Object, !stamped)
	if len(changes) == 0 {
		result.SetResourceVersion(live.GetResourceVersion())
		return result, nil
	}
	r.add(parent, childDiff{Kind: want.GetKind(), Namespace: want.GetNamespace(), Name: want.GetName(), Action: actionUpdate, Changes: changes})
	result.SetResourceVersion(live.GetResourceVersion() + "+planned")
	return result, nil
}

// DryRun implements reconcile.ChildWriter, as the controller's does.
func (r childRecorder) DryRun(ctx context.Context, gvr schema.GroupVersionResource, want *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	return r.client.Resource(gvr).Namespace(want.GetNamespace()).Apply(ctx, want.GetName(), want,
		metav1.ApplyOptions{FieldManager: contract.FieldManager, Force: true, DryRun: []string{metav1.DryRunAll}})
}

// Delete implements reconcile.ChildWriter: the prune is recorded.
func (r childRecorder) Delete(_ context.Context, parent *unstructured.Unstructured, gvr schema.GroupVersionResource, child *unstructured.Unstructured) error {
	kind := child.GetKind()
	if kind == "" {
		kind = gvr.Resource
	}
	r.add(parent, childDiff{Kind: kind, Namespace: child.GetNamespace(), Name: child.GetName(), Action: actionPrune})
	return nil
}

// PatchStatus implements reconcile.Writer: nothing is sent. The status
// fields the plan shows come from the outcome (Synced).
func (r *recorder) PatchStatus(_ context.Context, _ schema.GroupVersionResource, parent *unstructured.Unstructured, _ []byte) (*unstructured.Unstructured, error) {
	return parent, nil
}

// PatchParent implements reconcile.Writer: nothing is sent; a plan shows
// children, and a resource being deleted renders none.
func (r *recorder) PatchParent(context.Context, schema.GroupVersionResource, *unstructured.Unstructured, []byte) error {
	return nil
}

// Event implements reconcile.Writer: the plan records no event.
func (r *recorder) Event(*unstructured.Unstructured, string, string, string) {}

// Synced implements reconcile.Writer: the failures, waits, holds and
// status-template changes of one resource.
func (r *recorder) Synced(o reconcile.Outcome) {
	ref := r.ref(o.Parent)
	var statusDiff []fieldChange
	if o.Render != nil && !o.Render.StatusWaits {
		// The fields the status template renders (kept as they are while
		// it waits); the conditions stencil computes are its own business.
		statusDiff = statusChanges(o.Parent, status.TemplateStatus(o.Parent, o.Render.Status))
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.outcomes[o.Key] = o.Parent.GetUID()
	res := r.result(o.Parent.GetUID())
	res.unchanged += o.Unchanged
	if o.Status.FailReason != "" {
		res.failures = append(res.failures, failure{Parent: ref, Reason: o.Status.FailReason, Message: oneLine(o.Status.FailMessage)})
	}
	if o.Held != "" {
		res.held = append(res.held, waiting{Parent: ref, Message: o.Held, Paused: o.Paused})
	}
	switch {
	case o.Render != nil && len(o.Render.Waits) > 0:
		msgs := make([]string, len(o.Render.Waits))
		for i, w := range o.Render.Waits {
			msgs[i] = w.String()
		}
		res.waiting = append(res.waiting, waiting{Parent: ref, Message: strings.Join(msgs, "; ")})
	}
	if len(statusDiff) > 0 {
		res.children = append(res.children, childDiff{Parent: ref, Kind: o.Parent.GetKind(),
			Namespace: o.Parent.GetNamespace(), Name: o.Parent.GetName(), Action: actionUpdate, Changes: statusDiff})
	}
}

// reported says whether a sync of key reported a failure: its error is
// then the resource's, in the plan, not one that stops it.
func (r *recorder) reported(key reconcile.Key) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	uid, ok := r.outcomes[key]
	return ok && len(r.byParent[uid].failures) > 0
}

// report assembles the plan in the order of keys: per resource, its
// children created and updated in render order, its status, then its
// prunes by kind and name.
func (r *recorder) report(keys []reconcile.Key) *Report {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := &Report{Children: []childDiff{}, Failures: []failure{}}
	seen := map[types.UID]bool{}
	for _, key := range keys {
		uid, ok := r.outcomes[key]
		if !ok || seen[uid] {
			continue
		}
		seen[uid] = true
		res := r.byParent[uid]
		var pruned []childDiff
		for _, c := range res.children {
			if c.Action == actionPrune {
				pruned = append(pruned, c)
			} else {
				out.Children = append(out.Children, c)
			}
		}
		slices.SortFunc(pruned, func(a, b childDiff) int { return strings.Compare(a.Kind+"/"+a.Name, b.Kind+"/"+b.Name) })
		out.Children = append(out.Children, pruned...)
		out.Unchanged += res.unchanged
		out.Failures = append(out.Failures, res.failures...)
		out.Waiting = append(out.Waiting, res.waiting...)
		out.Held = append(out.Held, res.held...)
	}
	return out
}
