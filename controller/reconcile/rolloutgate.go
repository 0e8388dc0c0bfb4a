package reconcile

import (
	"context"
	"errors"
	"fmt"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"stencil.dev/stencil/contract"
	"stencil.dev/stencil/controller/reconcile/expect"
	"stencil.dev/stencil/controller/reconcile/rollout"
	"stencil.dev/stencil/controller/reconcile/status"
	"stencil.dev/stencil/controller/registry"
)

// Rolling out a template change (an entry's rollout: maxInFlight,
// maxFailed; its state machine is package rollout). Which render each
// resource is on is read back from the cluster, never kept only in
// memory: the resource's status names the
// revision of the templates it was last rendered with
// (contract.StatusTemplateRevision), once per resource, so that moving a
// resource writes only the children whose render changed. A resource on
// another revision has not moved: it waits for a slot, and until then
// stencil writes nothing for it, neither children nor status, so its
// children stay exactly as they are. A restart reads the same state again:
// a halted rollout stays halted.
//
// Two other places hold a revision, both per child
// (contract.AnnotationTemplateRevision). A child may carry the annotation
// from a stencil that stamped it on every child: a status without the
// field is then read from its children, and a child keeps the annotation
// until it is written anyway (drift.LegacyHash), so an upgrade rewrites
// nothing. And where the CRD's status schema would prune the field,
// stencil stamps every child, the only place that survives a restart: a
// template change then writes every child of the resources it moves
// (revisionOnChildren).
//
// A tenant's spec edit to a resource that has not moved yet waits with it:
// the old templates may be gone (a restart), and rendering the edit with
// the new ones would move the resource outside the rollout's bounds, which
// is what a halted rollout must not do. Its status keeps the old
// observedGeneration meanwhile, so kstatus reports it InProgress.
//
// A resource with no children yet is new: it is rendered at once, outside
// the bounds.

// rollouts holds the rollout of each entry that has one.
type rollouts struct {
	mu    sync.Mutex
	byGVR map[schema.GroupVersionResource]*rollout.Tracker
}

// rolloutGate runs before a resource of a rollout entry is rendered. It
// reads where the resource stands from the caches, and reports whether it
// may be rendered and applied now; a resource that must wait is left as it
// is (no write at all), and why is kept on the pass for its outcome. It also wakes the
// pending resources that free slots can take, and announces a halt.
func (c *Reconciler) rolloutGate(ctx context.Context, p *pass) bool {
	entry, key, parent := p.entry, p.key, p.parent
	logger := klog.FromContext(ctx)
	revision := entry.Set.Revision()
	st, _ := c.rolloutStateOf(parent, revision)
	c.rollouts.mu.Lock()
	r := c.rolloutFor(ctx, entry)
	prev, known := r.State(key.NamespacedName)
	st = r.Observe(key.NamespacedName, st)
	if known && prev != st {
		switch st {
		case rollout.Done:
			logger.Info("Rollout: resource Ready on the new templates", "revision", revision, "rolling", r.InFlight(), "pending", r.Count(rollout.Pending))
		case rollout.Failed:
			logger.Info("Rollout: resource failed on the new templates", "revision", revision, "failed", r.Count(rollout.Failed))
		}
	}
	admitted := r.Admit(key.NamespacedName)
	maxInFlight, _ := r.Maxes()
	held := ""
	if !admitted {
		held = fmt.Sprintf("held by the rollout to template revision %s: %d of maxInFlight %d moving, %d pending",
			revision, r.InFlight(), maxInFlight, r.Count(rollout.Pending))
		if r.Halted() {
			held = fmt.Sprintf("held by the rollout to template revision %s: halted, %d of the moved resources failed", revision, r.Count(rollout.Failed))
		}
	}
	if admitted && st == rollout.Pending {
		logger.Info("Rollout: moving resource to the new templates", "revision", revision,
			"rolling", r.InFlight(), "maxInFlight", maxInFlight, "pending", r.Count(rollout.Pending))
	}
	halt := ""
	if r.ReportHalt() {
		_, maxFailed := r.Maxes()
		halt = fmt.Sprintf("Rollout of %s to template revision %s halted: %d of the moved resources failed (maxFailed %d); the %d not moved keep their children until the config changes",
			entry.Res.String(), revision, r.Count(rollout.Failed), maxFailed, r.Count(rollout.Pending))
	}
	wake := r.Next()
	if r.Count(rollout.Pending) == 0 && r.InFlight() == 0 && known && prev != st {
		logger.Info("Rollout complete", "revision", revision, "done", r.Count(rollout.Done), "failed", r.Count(rollout.Failed))
	}
	c.reportRollout(entry, r)
	c.rollouts.mu.Unlock()

	if halt != "" {
		logger.Info("Rollout halted", "revision", revision, "reason", halt)
		c.warning(parent, reasonRolloutHalted, halt)
	}
	for _, k := range wake {
		if k != key.NamespacedName {
			c.opts.Enqueue(Key{GVR: key.GVR, NamespacedName: k})
		}
	}
	// The sync's one outcome says so (finish).
	p.held = held
	return admitted
}

// forgetRollout drops a deleted or paused resource from its entry's
// rollout, and wakes the resource that takes its slot.
func (c *Reconciler) forgetRollout(entry *registry.Parent, key Key) {
	c.rollouts.mu.Lock()
	r := c.rollouts.byGVR[key.GVR]
	var wake []types.NamespacedName
	if r != nil && r.Revision() == entry.Set.Revision() {
		if _, ok := r.State(key.NamespacedName); ok {
			r.Forget(key.NamespacedName)
			wake = r.Next()
			c.reportRollout(entry, r)
		}
	}
	c.rollouts.mu.Unlock()
	for _, k := range wake {
		c.opts.Enqueue(Key{GVR: key.GVR, NamespacedName: k})
	}
}

// rolloutFor returns the entry's rollout to its current revision, read
// from the caches the first time that revision is seen (start-up, a
// reload). Called under rollouts.mu.
func (c *Reconciler) rolloutFor(ctx context.Context, entry *registry.Parent) *rollout.Tracker {
	g := entry.Res.GVR()
	revision := entry.Set.Revision()
	if r := c.rollouts.byGVR[g]; r != nil && r.Revision() == revision {
		r.SetLimits(entry.Res.Rollout)
		return r
	}
	states, failing := map[types.NamespacedName]rollout.State{}, map[types.NamespacedName]bool{}
	for _, inf := range entry.Informers {
		for _, obj := range inf.GetIndexer().List() {
			u, ok := obj.(*unstructured.Unstructured)
			if !ok || u.GetDeletionTimestamp() != nil || u.GetAnnotations()[contract.AnnotationPaused] == "true" {
				continue
			}
			k := types.NamespacedName{Namespace: u.GetNamespace(), Name: u.GetName()}
			states[k], failing[k] = c.rolloutStateOf(u, revision)
		}
	}
	r := rollout.Start(revision, entry.Res.Rollout, states, failing)
	if c.rollouts.byGVR == nil {
		c.rollouts.byGVR = map[schema.GroupVersionResource]*rollout.Tracker{}
	}
	c.rollouts.byGVR[g] = r
	if r.Count(rollout.Pending) > 0 {
		klog.FromContext(ctx).Info("Rollout started", "resource", entry.Label, "revision", revision, "limits", entry.Res.Rollout.String(),
			"pending", r.Count(rollout.Pending), "failingFirst", r.FirstLeft(), "done", r.Count(rollout.Done),
			"rolling", r.Count(rollout.Rolling), "failed", r.Count(rollout.Failed))
	}
	return r
}

// reportRollout sets the rollout gauges of the entry. Called under rollouts.mu.
func (c *Reconciler) reportRollout(entry *registry.Parent, r *rollout.Tracker) {
	for _, st := range rollout.Reported {
		c.opts.Metrics.rolloutResources.WithLabelValues(entry.Label, st.String()).Set(float64(r.Count(st)))
	}
	c.opts.Metrics.rolloutHalted.WithLabelValues(entry.Label).Set(boolGauge(r.Halted() && r.Count(rollout.Pending) > 0))
}

// rolloutStateOf reads where parent stands from its status and cached
// children: new without any child, pending when it is on another revision,
// else failed, rolling or done by kstatus. failing says some child of a
// pending resource is Failed on its old revision.
func (c *Reconciler) rolloutStateOf(parent *unstructured.Unstructured, revision string) (st rollout.State, failing bool) {
	children := c.ownedChildren(parent)
	if len(children) == 0 {
		return rollout.NoChildren, false
	}
	objs := make([]*unstructured.Unstructured, len(children))
	for i, ch := range children {
		objs[i] = ch.obj
	}
	moved, all := revisionOf(parent, objs, revision)
	anyFailed, allReady := false, true
	for _, ch := range children {
		r := status.ReadinessOf(ch.obj)
		anyFailed = anyFailed || r.Failed
		allReady = allReady && r.OK
	}
	switch {
	case !moved:
		return rollout.Pending, anyFailed
	case anyFailed:
		return rollout.Failed, false
	case all && allReady:
		return rollout.Done, false
	}
	return rollout.Rolling, false
}

// revisionOf reports whether parent has moved to revision, and whether all
// of its children have. The status says so when it names a revision;
// otherwise (children that carry the revision annotation beside a status
// without the field, or a schema that prunes the field) the children's
// annotations do: moved when one carries it, all when every one does.
func revisionOf(parent *unstructured.Unstructured, children []*unstructured.Unstructured, revision string) (moved, all bool) {
	if rev, ok, _ := unstructured.NestedString(parent.Object, "status", contract.StatusTemplateRevision); ok && rev != "" {
		return rev == revision, rev == revision
	}
	all = true
	for _, ch := range children {
		if ch == nil {
			continue
		}
		if ch.GetAnnotations()[contract.AnnotationTemplateRevision] == revision {
			moved = true
		} else {
			all = false
		}
	}
	return moved, moved && all
}

// revisionOnChildren reports whether the entry's revision must be stamped
// on each child: a rollout entry whose CRD's status schema would prune
// contract.StatusTemplateRevision.
func (c *Reconciler) revisionOnChildren(entry *registry.Parent) bool {
	if entry.Res.Rollout == nil {
		return false
	}
	s, ok := c.reg.StatusSchema(entry)
	return ok && prunesRevision(s)
}

// prunesRevision reports whether the status schema s drops
// contract.StatusTemplateRevision.
func prunesRevision(s map[string]any) bool {
	kept, _ := registry.PruneBySchema(map[string]any{contract.StatusTemplateRevision: "x"}, s).(map[string]any)
	_, ok := kept[contract.StatusTemplateRevision]
	return !ok
}

// statusRevision returns the revision the status of parent, rendered with
// entry's templates into the children live, should name: "" for an entry
// without a rollout, and "" (the status stays without the field) where
// the children's revision annotations alone already say it: a status
// without the field, beside children that all carry the annotation, gets
// no patch for it.
func (c *Reconciler) statusRevision(entry *registry.Parent, parent *unstructured.Unstructured, live []*unstructured.Unstructured) string {
	revision := entry.Set.Revision()
	if entry.Res.Rollout == nil || revision == "" {
		return ""
	}
	if _, ok, _ := unstructured.NestedString(parent.Object, "status", contract.StatusTemplateRevision); !ok {
		if _, all := revisionOf(parent, live, revision); all {
			return ""
		}
	}
	return revision
}

// ownedChild is a cached child and its kind.
type ownedChild struct {
	childKind *registry.Child
	obj       *unstructured.Unstructured
}

// cachedChildren returns parent's cached children of kinds, found by the
// owner-UID label and kept only when parent is their controller.
func cachedChildren(kinds []*registry.Child, parent *unstructured.Unstructured) ([]ownedChild, error) {
	var out []ownedChild
	var errs []error
	for _, childKind := range kinds {
		inf := registry.InformerFor(childKind.Informers, parent.GetNamespace())
		if inf == nil {
			continue
		}
		objs, err := inf.GetIndexer().ByIndex(registry.OwnerUIDIndex, string(parent.GetUID()))
		if err != nil {
			errs = append(errs, fmt.Errorf("listing children of kind %s: %w", childKind.GVK.Kind, err))
			continue
		}
		for _, o := range objs {
			child, ok := o.(*unstructured.Unstructured)
			if !ok || child.GetNamespace() != parent.GetNamespace() {
				continue
			}
			if ref := metav1.GetControllerOf(child); ref == nil || ref.UID != parent.GetUID() {
				continue
			}
			out = append(out, ownedChild{childKind: childKind, obj: child})
		}
	}
	return out, errors.Join(errs...)
}

// ownedChildren is cachedChildren of every child kind, each replaced by
// stencil's last write where the cache has not shown it yet; an index
// error (never expected: the index exists on every child informer) counts
// as no child.
func (c *Reconciler) ownedChildren(parent *unstructured.Unstructured) []ownedChild {
	out, _ := cachedChildren(c.reg.ChildKinds(), parent)
	for i, oc := range out {
		// Where the cache has not shown stencil's last write yet, that
		// write says which revision the child is on (expectations).
		if written := c.expect.Newer(expect.KeyOf(oc.obj), oc.obj); written != nil {
			out[i].obj = written
		}
	}
	return out
}
