package offline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"stencil.dev/stencil/controller/reconcile"
)

// Recording is what one sync of a resource did, as the API server would
// have seen it.
type Recording struct {
	// Outcome is where the sync came to (reconcile.Writer.Synced); nil
	// when it reported none (the resource is deleted, paused before a
	// render, or a rollout holds it).
	Outcome *reconcile.Outcome
	// Written are the children the sync created or applied, as sent, in
	// order; Users holds the user each was written as ("" stencil's own).
	Written []*unstructured.Unstructured
	Users   []string
	// Pruned names the children it deleted, as Kind/name.
	Pruned []string
	// Status is the resource's status once the sync's patch applied (the
	// status it had when the sync patched none); StatusPatched says it
	// patched.
	Status        map[string]any
	StatusPatched bool
	// ParentPatches are the JSON patches of the resource itself (a
	// finalizer of helm-operator's released).
	ParentPatches []string
	// Events are the events it recorded, each "Type Reason: message".
	Events []string
	// Err is what the sync returned, as the work queue would see it;
	// RequeueAfter when it asked to look again.
	Err          error
	RequeueAfter time.Duration
}

// recorder is the case's reconcile.Writer: each write is recorded and
// answered as the API server would, never sent anywhere.
type recorder struct {
	mu sync.Mutex
	// observed are the case's observed objects, by objectKey: what an
	// apply is made over.
	observed map[string]*unstructured.Unstructured
	// rbac, when set, decides what an identity may write (rbac.go);
	// finalizers is the resource whose finalizers a child's owner
	// reference with blockOwnerDeletion needs the writer to update.
	rbac       *rbac
	finalizers schema.GroupVersionResource
	Recording
}

func newRecorder(parent *unstructured.Unstructured, observed []*unstructured.Unstructured) *recorder {
	st, _ := parent.Object["status"].(map[string]any)
	r := &recorder{observed: map[string]*unstructured.Unstructured{}, Recording: Recording{Status: runtime.DeepCopyJSON(orEmpty(st))}}
	for _, o := range observed {
		r.observed[objectKey(o)] = o
	}
	return r
}

// objectKey names an object by kind, namespace and name.
func objectKey(u *unstructured.Unstructured) string {
	return u.GroupVersionKind().GroupKind().String() + " " + u.GetNamespace() + "/" + u.GetName()
}

// orEmpty is m, or an empty map for nil.
func orEmpty(m map[string]any) map[string]any {
	if m == nil {
		return map[string]any{}
	}
	return m
}

// As implements reconcile.Writer.
func (r *recorder) As(user string) (reconcile.ChildWriter, error) {
	return childRecorder{recorder: r, user: user}, nil
}

// PatchStatus implements reconcile.Writer: the merge patch applied to the
// resource, as the status subresource would.
func (r *recorder) PatchStatus(_ context.Context, _ schema.GroupVersionResource, parent *unstructured.Unstructured, patch []byte) (*unstructured.Unstructured, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	doc, err := json.Marshal(map[string]any{"status": r.Status})
	if err != nil {
		return nil, err
	}
	var body map[string]json.RawMessage
	if err := json.Unmarshal(patch, &body); err != nil {
		return nil, fmt.Errorf("decoding the status patch: %w", err)
	}
	merged, err := jsonpatch.MergePatch(doc, mustJSON(map[string]json.RawMessage{"status": body["status"]}))
	if err != nil {
		return nil, fmt.Errorf("applying the status patch: %w", err)
	}
	var out struct {
		Status map[string]any `json:"status"`
	}
	if err := json.Unmarshal(merged, &out); err != nil {
		return nil, err
	}
	r.Status, r.StatusPatched = orEmpty(out.Status), true
	result := parent.DeepCopy()
	result.Object["status"] = runtime.DeepCopyJSON(r.Status)
	result.SetResourceVersion(parent.GetResourceVersion() + "1")
	return result, nil
}

// mustJSON encodes v, which is always encodable.
func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

// PatchParent implements reconcile.Writer.
func (r *recorder) PatchParent(_ context.Context, _ schema.GroupVersionResource, _ *unstructured.Unstructured, patch []byte) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ParentPatches = append(r.ParentPatches, string(patch))
	return nil
}

// Event implements reconcile.Writer.
func (r *recorder) Event(_ *unstructured.Unstructured, eventtype, reason, message string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.Events = append(r.Events, eventtype+" "+reason+": "+message)
}

// Synced implements reconcile.Writer.
func (r *recorder) Synced(o reconcile.Outcome) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.Outcome = &o
}

// childRecorder is the recorder's ChildWriter, as one user.
type childRecorder struct {
	*recorder
	user string
}

// written records a child write.
func (r childRecorder) written(want *unstructured.Unstructured) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.Written = append(r.Written, want.DeepCopy())
	r.Users = append(r.Users, r.user)
}

// allowed returns the API server's answer to the write of verb on obj of
// gvr as the child writer's user: nil, or Forbidden. A child whose owner
// reference sets blockOwnerDeletion also needs update on the owner's
// finalizers (the OwnerReferencesPermissionEnforcement admission).
func (r childRecorder) allowed(verb string, gvr schema.GroupVersionResource, obj *unstructured.Unstructured) error {
	if r.rbac == nil || r.user == "" {
		return nil
	}
	if err := r.rbac.allowed(r.user, verb, gvr, "", obj.GetNamespace(), obj.GetName()); err != nil {
		return err
	}
	if verb == "delete" {
		return nil
	}
	for _, ref := range obj.GetOwnerReferences() {
		if ref.BlockOwnerDeletion == nil || !*ref.BlockOwnerDeletion {
			continue
		}
		if err := r.rbac.allowed(r.user, "update", r.finalizers, "finalizers", obj.GetNamespace(), ref.Name); err != nil {
			return apierrors.NewForbidden(gvr.GroupResource(), obj.GetName(), fmt.Errorf(
				"cannot set blockOwnerDeletion if an ownerReference refers to a resource you can't set finalizers on: %w", err))
		}
	}
	return nil
}

// Create implements reconcile.ChildWriter: the object as created.
func (r childRecorder) Create(_ context.Context, _ *unstructured.Unstructured, gvr schema.GroupVersionResource, want *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	if err := r.allowed("create", gvr, want); err != nil {
		return nil, err
	}
	r.written(want)
	created := want.DeepCopy()
	created.SetResourceVersion("1")
	return created, nil
}

// Apply implements reconcile.ChildWriter: the observed object with the
// applied fields set over it, as a forced apply leaves it (its status and
// the fields others set kept).
func (r childRecorder) Apply(_ context.Context, _ *unstructured.Unstructured, gvr schema.GroupVersionResource, want *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	if err := r.allowed("patch", gvr, want); err != nil {
		return nil, err
	}
	r.written(want)
	live, ok := r.observed[objectKey(want)]
	if !ok {
		return want.DeepCopy(), nil
	}
	applied := live.DeepCopy()
	mergeInto(applied.Object, runtime.DeepCopyJSON(want.Object))
	applied.SetResourceVersion(live.GetResourceVersion() + "1")
	return applied, nil
}

// mergeInto sets every field of from over into: maps merged key by key,
// anything else replaced.
func mergeInto(into, from map[string]any) {
	for k, v := range from {
		if fm, ok := v.(map[string]any); ok {
			if im, ok := into[k].(map[string]any); ok {
				mergeInto(im, fm)
				continue
			}
		}
		into[k] = v
	}
}

// errNoServer is the answer to a dry run: there is no API server to ask.
var errNoServer = errors.New("stencil test has no API server to dry-run against")

// DryRun implements reconcile.ChildWriter.
func (childRecorder) DryRun(context.Context, schema.GroupVersionResource, *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	return nil, errNoServer
}

// Delete implements reconcile.ChildWriter.
func (r childRecorder) Delete(_ context.Context, _ *unstructured.Unstructured, gvr schema.GroupVersionResource, child *unstructured.Unstructured) error {
	if err := r.allowed("delete", gvr, child); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.Pruned = append(r.Pruned, child.GetKind()+"/"+child.GetName())
	return nil
}
