package reconcile

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/klog/v2"

	"stencil.dev/stencil/contract"
	"stencil.dev/stencil/controller/reads"
	"stencil.dev/stencil/controller/reconcile/drift"
	"stencil.dev/stencil/controller/reconcile/expect"
	"stencil.dev/stencil/controller/reconcile/memory"
	"stencil.dev/stencil/controller/reconcile/rollout"
	"stencil.dev/stencil/controller/reconcile/status"
	"stencil.dev/stencil/controller/registry"
	"stencil.dev/stencil/controller/requeue"
	"stencil.dev/stencil/templates"
	"stencil.dev/stencil/templates/budget"
	"stencil.dev/stencil/templates/view"
)

// Reasons of events (those of the Ready condition are the status package's).
const (
	reasonCreated        = "Created"
	reasonUpdated        = "Updated"
	reasonPruned         = "Pruned"
	reasonPruneFailed    = "PruneFailed"
	reasonStatusRejected = "StatusRejected"
	reasonRolloutHalted  = "RolloutHalted"
	// reasonHooksNotApplied lists a chart's hooks and tests, once per
	// generation.
	reasonHooksNotApplied = "HooksNotApplied"
)

// childRef names a child within one parent.
type childRef = memory.Child

// pass is one sync of one resource: what every phase needs, gathered once
// (kro's ReconcileContext).
type pass struct {
	key    Key
	entry  *registry.Parent
	parent *unstructured.Unstructured
	// render is what the templates rendered; nil until they did.
	render *templates.Result
	// reads is what the entry's reads found; nil without reads, or
	// until they were resolved.
	reads *templates.Reads
	// as is the user the children are written as, and that what the
	// tenant names is read as (the entry's identity in the resource's
	// namespace); "" for stencil's own account.
	as string
	// children writes the children, as as; set by writeAs before the
	// first write.
	children ChildWriter
	// held says why a rollout holds the resource (rolloutGate); every
	// outcome of the pass carries it.
	held string
}

// Sync reconciles one custom resource. It reads only from the caches, writes
// only what differs, and classifies every error it returns.
func (c *Reconciler) Sync(ctx context.Context, key Key) error {
	logger := klog.FromContext(ctx)
	entry := c.reg.Parent(key.GVR)
	if entry == nil {
		// Removed from the config since it was queued; Reconfigure
		// forgot it.
		logger.V(4).Info("Resource no longer configured")
		return nil
	}
	// Before the read: should the cache be older than stencil's last
	// status patch, that patch's event queues the resource again, however
	// quiet (expect.Writes.Looking).
	c.expect.Looking(expect.NewKey(entry.GVK.GroupKind(), key.Namespace, key.Name))
	parent, err := registry.GetCached(entry.Informers, key.GVR.GroupResource(), key.Namespace, key.Name)
	if apierrors.IsNotFound(err) {
		// Deleted: the garbage collector removes the children through their
		// ownerReferences.
		logger.V(4).Info("Resource no longer exists")
		if entry.Res.Rollout != nil {
			c.forgetRollout(entry, key)
		}
		// Its fight episode, last status patch, refused children and
		// failed render (package memory), and what it read.
		c.memory.Resources.Forget(key)
		if c.opts.Reads != nil {
			c.opts.Reads.Forget(reads.Reader(key))
		}
		return nil
	}
	if err != nil {
		return err
	}
	if parent.GetDeletionTimestamp() != nil {
		return c.releaseHelmFinalizer(ctx, entry, parent)
	}
	if c.expect.Newer(expect.KeyOf(parent), parent) != nil {
		// The cache has not shown stencil's last status patch yet; the
		// patch's watch event queues the resource again.
		logger.V(4).Info("Cache has not shown stencil's own status patch yet, waiting for its event")
		return nil
	}
	p := &pass{key: key, entry: entry, parent: parent, as: userOf(entry.Res.Identity, parent.GetNamespace())}
	if parent.GetAnnotations()[contract.AnnotationPaused] == "true" {
		if entry.Res.Rollout != nil {
			c.forgetRollout(entry, key)
		}
		msg := contract.AnnotationPaused + ` is "true": stencil makes no writes for this resource`
		return c.finish(ctx, p, Outcome{Key: key, Parent: parent, Held: "Paused: " + msg, Paused: true}, status.Paused(parent, msg))
	}
	if entry.Res.Rollout != nil && !c.rolloutGate(ctx, p) && !c.opts.PlanHeld {
		// Not moved to the new templates yet: left exactly as it is,
		// nothing to patch.
		klog.FromContext(ctx).V(4).Info("Rollout: waiting for a slot, children left as they are", "revision", entry.Set.Revision())
		return c.finish(ctx, p, Outcome{Key: key, Parent: parent}, nil)
	}

	return c.renderAndConverge(ctx, p)
}

// renderAndConverge renders the resource's children and status, then
// converges on them; a render that fails is reported, and nothing is
// applied or pruned.
func (c *Reconciler) renderAndConverge(ctx context.Context, p *pass) error {
	entry, parent := p.entry, p.parent
	if err := c.memory.RenderFailures.Get(p.key, entry, parent); err != nil {
		// The same render failed before: reported, not run again.
		klog.FromContext(ctx).V(4).Info("Render failed before with this spec and these templates, not rendered again")
		reason := status.ReasonRenderFailed
		if errors.Is(err, templates.ErrRenderKilled) {
			reason = status.ReasonRenderKilled
		}
		return c.fail(ctx, p, reason, err)
	}
	obj, err := view.NewObject(parent, p.key.GVR)
	if err != nil {
		return c.fail(ctx, p, status.ReasonRenderFailed, requeue.Terminal(fmt.Errorf("reading %s: %w", p.key, err)))
	}
	// A render that reads live children or other objects depends on them
	// too: its failure is not remembered by the resource's spec alone.
	readsLive := entry.Set.ReadsLive() || entry.Set.HasReads()
	var live templates.Live
	if entry.Set.ReadsLive() {
		live = c.liveChildrenOf(ctx, entry, parent)
	}
	r, err := c.render(ctx, p, obj, live)
	var readErr *templates.ReadError
	switch {
	case errors.As(err, &readErr):
		return c.readFailed(ctx, p, readErr)
	case err == nil && r == nil:
		return c.waitForReads(ctx, p)
	}
	if err == nil {
		c.memory.RenderFailures.Forget(p.key)
		c.memory.LostWorkers.Reset(p.key)
		p.render = r
		return c.converge(ctx, p)
	}
	if errors.Is(err, templates.ErrWallDown) || errors.Is(err, templates.ErrWorkerLost) {
		return c.renderUnavailable(ctx, p, err)
	}
	c.memory.LostWorkers.Reset(p.key)
	c.opts.Metrics.renderErrors.WithLabelValues(entry.Label).Inc()
	reason := status.ReasonRenderFailed
	switch {
	case errors.Is(err, budget.ErrExceeded):
		c.opts.Metrics.budgetExceeded.WithLabelValues(entry.Label).Inc()
	case errors.Is(err, templates.ErrRenderKilled):
		reason = status.ReasonRenderKilled
	}
	err = requeue.Terminal(err)
	if !readsLive {
		c.memory.RenderFailures.Set(p.key, entry, parent, err)
	}
	// Nothing is applied or pruned when the render fails: a half-rendered set
	// of children must not replace a working one.
	return c.fail(ctx, p, reason, err)
}

// lostInARow is how many renders in a row may lose their worker from
// outside before the resource reports it: one loss is retried at once by
// the pool, and a node's OOM killer may take a worker now and then.
const lostInARow = 3

// renderUnavailable handles a render that did not run to its end for a
// reason outside the resource: no worker could start (reported at once:
// nothing is rendered for anyone), or its worker was lost from outside
// (reported from the lostInARow-th loss in a row). Neither is remembered
// as the resource's failure nor Stalled: the error is transient, and the
// queue retries it with backoff.
func (c *Reconciler) renderUnavailable(ctx context.Context, p *pass, err error) error {
	err = fmt.Errorf("rendering %s: %w", p.key, err)
	if errors.Is(err, templates.ErrWallDown) {
		return c.fail(ctx, p, status.ReasonRenderUnavailable, err)
	}
	n := c.memory.LostWorkers.Add(p.key)
	c.opts.Metrics.workersLost.WithLabelValues(p.entry.Label).Inc()
	if n < lostInARow {
		klog.FromContext(ctx).Info("Render worker lost from outside the render; retried", "inARow", n, "err", err.Error())
		return err
	}
	return c.fail(ctx, p, status.ReasonRenderWorkerLost, fmt.Errorf("%w (%d renders in a row lost their worker: the node's OOM killer may act on what this render uses)", err, n))
}

// ForgetUnconfigured drops the same of every resource whose entry left the
// config, their entries' rollouts and what they read: nothing queues
// those resources again, so nothing else would.
func (c *Reconciler) ForgetUnconfigured() {
	c.memory.Resources.Retain(func(k Key) bool { return c.reg.Parent(k.GVR) != nil })
	c.rollouts.mu.Lock()
	maps.DeleteFunc(c.rollouts.byGVR, func(g schema.GroupVersionResource, _ *rollout.Tracker) bool { return c.reg.Parent(g) == nil })
	c.rollouts.mu.Unlock()
	if c.opts.Reads != nil {
		c.opts.Reads.Retain(func(r reads.Reader) bool { return c.reg.Parent(r.GVR) != nil })
	}
}

// warnOnce records a Warning event for a failure unless the resource's Ready
// condition already reports it (same reason, message and generation): a
// resync or a conflict recheck must not repeat the event.
func (c *Reconciler) warnOnce(parent *unstructured.Unstructured, reason, message string) {
	if !status.AlreadyReported(parent, reason, message) {
		c.warning(parent, reason, message)
	}
}

// warnHooks records, once per generation of the resource, a Warning event
// listing the hooks and tests its chart rendered, which stencil does not
// apply. A generation the status already reports was synced before (by
// this process or an earlier one); the memo covers the syncs before the
// first status patch of a generation.
func (c *Reconciler) warnHooks(p *pass, hooks []string) {
	if len(hooks) == 0 {
		return
	}
	gen := p.parent.GetGeneration()
	if seen, _, _ := unstructured.NestedInt64(p.parent.Object, "status", "observedGeneration"); seen == gen {
		return
	}
	if !c.memory.Resources.HooksWarned(p.key, gen) {
		c.warning(p.parent, reasonHooksNotApplied, "Chart hooks and tests are not applied by stencil: "+strings.Join(hooks, "; "))
	}
}

// fail records a failure on the resource (event and status) and returns err.
func (c *Reconciler) fail(ctx context.Context, p *pass, reason string, err error) error {
	return c.failWith(ctx, p, status.Outcome{}, reason, err)
}

// failWith is fail with the rest of the status (the status template's
// fields, the revision) as out says. The failure waits for a person
// (Stalled) when every error in err is terminal.
func (c *Reconciler) failWith(ctx context.Context, p *pass, out status.Outcome, reason string, err error) error {
	out.FailReason, out.FailMessage, out.Stalled = reason, err.Error(), isAllTerminal(err)
	c.warnOnce(p.parent, reason, out.FailMessage)
	if perr := c.setStatus(ctx, p, out, 0); perr != nil {
		return errors.Join(err, perr)
	}
	return err
}

// setStatus finishes a sync that came to out: the status computed from
// it is patched.
func (c *Reconciler) setStatus(ctx context.Context, p *pass, out status.Outcome, unchanged int) error {
	if p.reads != nil {
		out.ReadsDeclared, out.Reads = true, p.reads.Status()
	}
	return c.finish(ctx, p, Outcome{Key: p.key, Parent: p.parent, Render: p.render, Status: out, Unchanged: unchanged}, status.Desired(p.parent, out))
}

// finish is the one place a sync's outcome leaves the reconciler, once per
// sync, and the only caller of patchStatus: the writer is told where the
// sync came to (with why a rollout holds it, p.held)
// (what "stencil diff" records), then the status want is patched, unless
// want is nil (a first status deferred until the new children report, a
// resource a rollout holds as it is).
func (c *Reconciler) finish(ctx context.Context, p *pass, o Outcome, want map[string]any) error {
	if o.Held == "" {
		o.Held = p.held
	}
	c.writer.Synced(o)
	if want == nil {
		return nil
	}
	return c.patchStatus(ctx, p, want)
}

// converge applies, prunes and reports on the rendered children.
func (c *Reconciler) converge(ctx context.Context, p *pass) error {
	if left, ok := c.memory.Terminating.Left(p.parent.GetNamespace()); ok {
		// Its namespace is being deleted and takes it along; look again
		// once the memory of that expires, in case it is still there.
		klog.FromContext(ctx).V(4).Info("Namespace is terminating, skipping", "namespace", p.parent.GetNamespace())
		return requeue.After(nil, left)
	}
	c.warnHooks(p, p.render.Hooks)
	if err := c.writeAs(ctx, p); err != nil {
		return c.identityFailed(ctx, p, err)
	}
	w := c.applyAll(ctx, p)
	if w.end {
		return requeue.After(w.err, w.after)
	}
	if isForbidden(w.err) {
		// The identity may not write a child: nothing is pruned in this
		// pass (a half-written set must not replace a working one), and
		// the resource is looked at again when the refused write is sent
		// again, as RBAC changes send no event.
		w.soon(recheckIn(w.err, c.opts.IdentityRecheck))
	} else if len(p.render.Waits) == 0 {
		// While a template waits, its children are not rendered: nothing
		// is pruned until every template renders again.
		pruned, err := c.prune(ctx, p, w.rendered)
		if err != nil {
			w.err = errors.Join(w.err, err)
		}
		if isForbidden(err) {
			w.soon(recheckIn(err, c.opts.IdentityRecheck))
		}
		w.changes.pruned = pruned
	}
	c.recordChanges(p.parent, w.changes)
	return requeue.After(c.report(ctx, p, &w), w.after)
}

// writes is what applying every rendered child of one resource came to.
type writes struct {
	// live holds each rendered child as last seen, in render order (nil:
	// not written).
	live []*unstructured.Unstructured
	// rendered names every rendered child, for prune.
	rendered  map[childRef]bool
	conflicts []string
	changes   childChanges
	// unchanged counts the children found in sync.
	unchanged int
	// err joins the apply failures; with end, what the sync returns at
	// once, without pruning or a status of its own.
	err error
	end bool
	// after, when set, asks to look again then (a denied correction).
	after time.Duration
}

// soon asks to look again after d, unless sooner is asked already.
func (w *writes) soon(d time.Duration) {
	if w.after == 0 || d < w.after {
		w.after = d
	}
}

// applyAll brings every rendered child to the cluster (applyChild).
func (c *Reconciler) applyAll(ctx context.Context, p *pass) writes {
	desired := p.render.Children
	w := writes{live: make([]*unstructured.Unstructured, len(desired)), rendered: map[childRef]bool{}}
	onChildren := c.revisionOnChildren(p.entry)
	for i, want := range desired {
		w.rendered[childRef{GVK: want.GroupVersionKind(), Name: want.GetName()}] = true
		if onChildren {
			drift.StampRevision(want, p.entry.Set.Revision())
		}
		r := c.applyChild(ctx, p, want)
		if r.requeue > 0 {
			w.soon(r.requeue)
		}
		switch {
		case r.failReason != "":
			w.err, w.end = c.fail(ctx, p, r.failReason, r.err), true
			return w
		case r.end:
			w.err, w.end = r.err, true
			return w
		case r.conflict != "":
			w.conflicts = append(w.conflicts, r.conflict)
		case r.err != nil:
			w.err = errors.Join(w.err, r.err)
		}
		w.live[i] = r.live
		switch r.change {
		case reasonCreated:
			w.changes.created = append(w.changes.created, want.GetKind()+"/"+want.GetName())
		case reasonUpdated:
			w.changes.updated = append(w.changes.updated, want.GetKind()+"/"+want.GetName())
		case "":
			if r.live != nil {
				w.unchanged++
			}
		}
	}
	return w
}

// report writes the status that the writes w came to, and asks to look
// again where nothing else would bring the resource back: a foreign object
// holding a child's name, the end of a fight episode, a first status.
func (c *Reconciler) report(ctx context.Context, p *pass, w *writes) error {
	r := p.render
	out := status.Outcome{Extra: r.Status, KeepTemplateStatus: r.StatusWaits, Live: w.live, Revision: c.statusRevision(p.entry, p.parent, w.live),
		Waiting: waitingMessage(r.Waits)}
	if r.Release != "" {
		out.Release = &status.Release{Notes: r.Notes, Changed: w.changes.any()}
	}
	switch {
	case isForbidden(w.err):
		// Retried (converge asked to look again): a RoleBinding may come.
		return c.failWith(ctx, p, status.Outcome{Extra: out.Extra, KeepTemplateStatus: out.KeepTemplateStatus, Revision: out.Revision},
			status.ReasonForbidden, w.err)
	case w.err != nil && isAllTerminal(w.err):
		// A terminal apply error (invalid object) is reported and not
		// retried.
		return c.fail(ctx, p, status.ReasonApplyFailed, requeue.Terminal(w.err))
	case w.err != nil:
		// A transient one is reported and retried with back-off.
		return c.failWith(ctx, p, status.Outcome{Extra: out.Extra, KeepTemplateStatus: out.KeepTemplateStatus, Revision: out.Revision},
			status.ReasonApplyFailed, w.err)
	case len(w.conflicts) > 0:
		out.FailReason, out.FailMessage = status.ReasonOwnershipConflict, strings.Join(w.conflicts, "; ")
		out.Stalled = true
		c.warnOnce(p.parent, out.FailReason, out.FailMessage)
		// Look again later: once the owner of the foreign object removes it,
		// stencil creates its own without waiting for the resync.
		w.soon(c.opts.ConflictRecheck)
	}
	if msg, ends := c.memory.Guard.Episode(p.key); msg != "" {
		out.Fighting = fmt.Sprintf("%s; corrections are limited to one per %s", msg, c.opts.FightInterval)
		// Look again when the episode would end, to clear the condition.
		w.soon(time.Until(ends) + time.Second)
	}
	if len(w.changes.created) > 0 && out.FailReason == "" && c.opts.FirstStatusDelay > 0 && !readyIn(status.Desired(p.parent, out)) {
		// Children were just created, so they cannot be ready yet. Their
		// events bring the resource back, usually ready, and that sync
		// writes the first status; if they are slower, the requeue writes
		// Progressing. One status patch per new resource instead of two;
		// until then kstatus sees the CRD's status default
		// (observedGeneration 0 < generation) and says InProgress.
		w.soon(c.opts.FirstStatusDelay)
		return c.finish(ctx, p, Outcome{Key: p.key, Parent: p.parent, Render: r, Status: out, Unchanged: w.unchanged}, nil)
	}
	return c.setStatus(ctx, p, out, w.unchanged)
}

// childResult is what applying one rendered child came to.
type childResult struct {
	// live is the child as last seen (apply response or cache); nil when
	// it was not written (conflict, failure).
	live *unstructured.Unstructured
	// change is reasonCreated or reasonUpdated when the child changed.
	change string
	// conflict says which foreign object holds the child's name.
	conflict string
	// err is the apply's failure, terminal or not; with end, what the
	// sync returns at once; with failReason, what it fails with.
	err error
	// end ends the sync at once, with err: the fence refused a write (nil
	// err: the namespace is terminating, nothing to do).
	end bool
	// failReason fails the sync with this reason and err: the child's kind
	// is not served, or it cannot be hashed.
	failReason string
	// requeue, when set, asks to look again then: a correction the fight
	// guard denied.
	requeue time.Duration
}

// applyChild brings one rendered child to the cluster: create it when no
// object holds its name, apply it when it drifted (guarded against a
// fight), or nothing when it is in sync.
func (c *Reconciler) applyChild(ctx context.Context, p *pass, want *unstructured.Unstructured) childResult {
	gvk := want.GroupVersionKind()
	childKind := c.reg.Child(gvk)
	if childKind == nil {
		// Rendered, so allowed; not served by the API server (its CRD
		// is not installed) or cluster-scoped. Not retried: stencil
		// renders every resource again when the kind is served.
		return childResult{failReason: status.ReasonApplyFailed, err: requeue.Terminal(fmt.Errorf(
			"%s/%s: kind %s is not served by the API server as a namespaced kind (is its CRD installed?)", gvk.Kind, want.GetName(), gvk))}
	}
	hash, err := drift.StampHash(want)
	if err != nil {
		return childResult{failReason: status.ReasonRenderFailed, err: requeue.Terminal(err)}
	}
	live, err := c.liveChild(ctx, childKind, want)
	if err != nil {
		return childResult{err: err}
	}
	ch := childSync{pass: p, childKind: childKind, ref: childRef{GVK: gvk, Name: want.GetName()}, want: want, hash: hash}
	if live == nil {
		return c.createChild(ctx, ch)
	}
	if ref := metav1.GetControllerOf(live); ref == nil || ref.UID != p.parent.GetUID() {
		return childResult{conflict: ch.conflict()}
	}
	return c.correctChild(ctx, ch, live)
}

// childSync is one rendered child on its way to the cluster: whose it is,
// its kind, the render and its applied hash.
type childSync struct {
	*pass
	childKind *registry.Child
	ref       childRef
	want      *unstructured.Unstructured
	hash      string
}

// conflict says that a foreign object holds the child's name.
func (ch childSync) conflict() string {
	return fmt.Sprintf("%s/%s exists and is not controlled by %s %s", ch.want.GetKind(), ch.want.GetName(), ch.entry.GVK.Kind, ch.parent.GetName())
}

// createChild creates a child no object holds the name of.
func (c *Reconciler) createChild(ctx context.Context, ch childSync) childResult {
	logger := klog.FromContext(ctx)
	want := ch.want
	if err := c.refusedBefore(ctx, ch.key, ch.ref, ch.hash, nil, want); err != nil {
		return childResult{err: err}
	}
	if err := c.mayWrite(want.GetNamespace()); err != nil {
		return childResult{end: true, err: err}
	}
	done := c.expect.Writing(expect.KeyOf(want))
	created, taken, err := c.createByApply(ctx, ch)
	if err != nil || taken {
		c.expected(ch.key, done(nil, false))
	}
	switch {
	case apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause):
		logger.V(4).Info("Namespace is terminating, skipping", "kind", want.GetKind(), "child", klog.KObj(want))
		c.memory.Terminating.Mark(want.GetNamespace())
		return childResult{end: true}
	case taken:
		return childResult{conflict: ch.conflict()}
	case isForbidden(err):
		return childResult{err: err}
	case err != nil:
		return childResult{err: c.applyFailed(ch.key, ch.ref, ch.hash, nil, want, err)}
	}
	c.memory.Refusals.Clear(ch.key, ch.ref)
	c.opts.Metrics.childWrites.WithLabelValues(ch.entry.Label, want.GetKind(), verbCreate).Inc()
	c.expectChild(ch, created, done)
	logger.V(2).Info("Created child", "kind", want.GetKind(), "child", klog.KObj(want))
	return childResult{live: created, change: reasonCreated}
}

// correctChild applies a child stencil controls when it drifted from the
// render, unless the fight guard denies the correction.
func (c *Reconciler) correctChild(ctx context.Context, ch childSync, live *unstructured.Unstructured) childResult {
	logger := klog.FromContext(ctx)
	want := ch.want
	d := drift.Detect(live, want, drift.LegacyHash(live, want, ch.hash))
	if d.Kind == drift.Unowned && c.serverAgrees(ctx, ch.children, ch.childKind, want, live, ch.hash) {
		// No manager holds a field of the render, yet applying it
		// would change nothing: the server dropped or normalised it.
		d.Kind = drift.InSync
	}
	if d.Kind == drift.InSync {
		return childResult{live: live}
	}
	if err := c.refusedBefore(ctx, ch.key, ch.ref, ch.hash, live, want); err != nil {
		return childResult{err: err}
	}
	if d.Kind != drift.TemplateChanged && !c.memory.Guard.Allow(ch.key) {
		// Same template output, yet a field stencil sets was taken or
		// removed again: something keeps reverting it.
		msg := drift.FightMessage(want, d)
		if c.memory.Guard.Deny(ch.key, msg) && !status.IsThrottled(ch.parent) {
			// Once per episode; while it lasts, the Throttled
			// condition reports each denied correction.
			c.warning(ch.parent, status.ReasonFieldFight, fmt.Sprintf("%s; corrections limited to one per %s", msg, c.opts.FightInterval))
		}
		return childResult{live: live, requeue: c.opts.FightInterval}
	}
	logger.V(2).Info("Child drifted", "kind", want.GetKind(), "child", klog.KObj(want),
		"drift", d.Kind.String(), "field", d.Path, "manager", d.Manager)
	if err := c.mayWrite(want.GetNamespace()); err != nil {
		return childResult{end: true, err: err}
	}
	done := c.expect.Writing(expect.KeyOf(want))
	applied, err := ch.children.Apply(ctx, ch.parent, ch.childKind.GVR, want)
	if err != nil || applied.GetResourceVersion() == live.GetResourceVersion() {
		// Failed, or a no-op: nothing new to expect.
		c.expected(ch.key, done(nil, false))
	}
	switch {
	case apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause):
		// The namespace is going away and takes the resource with it:
		// nothing to repair, and nothing worth retrying.
		logger.V(4).Info("Namespace is terminating, skipping", "kind", want.GetKind(), "child", klog.KObj(want))
		c.memory.Terminating.Mark(want.GetNamespace())
		return childResult{end: true}
	case isForbidden(err):
		return childResult{live: live, err: err}
	case err != nil:
		return childResult{err: c.applyFailed(ch.key, ch.ref, ch.hash, live, want, err)}
	}
	c.memory.Refusals.Clear(ch.key, ch.ref)
	c.opts.Metrics.childWrites.WithLabelValues(ch.entry.Label, want.GetKind(), verbUpdate).Inc()
	if applied.GetResourceVersion() == live.GetResourceVersion() {
		// The server found nothing to change: no event for a no-op.
		logger.V(2).Info("Applied child, unchanged", "kind", want.GetKind(), "child", klog.KObj(want))
		return childResult{live: applied}
	}
	c.expectChild(ch, applied, done)
	logger.V(2).Info("Applied child", "kind", want.GetKind(), "child", klog.KObj(want))
	return childResult{live: applied, change: reasonUpdated}
}

// refusedBefore returns the error the API server refused this render of the
// child with, when it was sent against the same live object (nil: none
// exists) before; it is then not sent again (memory.Refusals).
func (c *Reconciler) refusedBefore(ctx context.Context, key Key, ref childRef, hash string, live, want *unstructured.Unstructured) error {
	err := c.memory.Refusals.Get(key, ref, hash, memory.LiveVersion(live))
	if err != nil {
		klog.FromContext(ctx).V(4).Info("Render refused before, not sent again", "kind", want.GetKind(), "child", klog.KObj(want))
	}
	return err
}

// applyFailed wraps a failed create or apply of want against live (nil: none
// existed) (applyError) and, when the API server refused the object itself,
// remembers the refusal so that the same render is not sent again
// (memory.Refusals).
func (c *Reconciler) applyFailed(key Key, ref childRef, hash string, live, want *unstructured.Unstructured, err error) error {
	err = applyError(want, err)
	if requeue.IsTerminal(err) {
		c.memory.Refusals.Set(key, ref, hash, memory.LiveVersion(live), err)
	}
	return err
}

// applyError wraps a failed create or apply of want, terminal when the API
// server rejected the object itself (retrying cannot help).
func applyError(want *unstructured.Unstructured, err error) error {
	err = fmt.Errorf("applying %s/%s: %w", want.GetKind(), want.GetName(), err)
	if isRejected(err) {
		err = requeue.Terminal(err)
	}
	return err
}

// waitingMessage names each waiting template and the child it waits for,
// e.g. "app.yaml.tmpl waits for Deployment/db, which is not ready".
func waitingMessage(waits []templates.Wait) string {
	msgs := make([]string, len(waits))
	for i, w := range waits {
		msgs[i] = w.String()
	}
	return strings.Join(msgs, "; ")
}

// readyIn reports whether a computed status has Ready=True.
func readyIn(st map[string]any) bool {
	return meta.IsStatusConditionTrue(status.Conditions(st), contract.ConditionReady)
}

// isAllTerminal reports whether every error joined in err is terminal.
func isAllTerminal(err error) bool {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range j.Unwrap() {
			if !isAllTerminal(e) {
				return false
			}
		}
		return true
	}
	return requeue.IsTerminal(err)
}

// liveChild returns the child as it exists, or nil when no object of its
// name exists. Children carry stencil's label, so the filtered cache holds
// them; where the cache has not shown stencil's own last write of the child
// yet, what that write returned stands in for it (expectations). On a miss,
// the metadata-only cache of every object of the kind (names, UIDs and
// owners; see registry.NameTaken) tells, without a request, whether a
// foreign object of that name exists; only then is it read, to be reported.
// Without a metadata cache (Options.Metadata nil) a GET tells.
func (c *Reconciler) liveChild(ctx context.Context, childKind *registry.Child, want *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	live, err := registry.GetCached(childKind.Informers, childKind.GVR.GroupResource(), want.GetNamespace(), want.GetName())
	if err != nil && !apierrors.IsNotFound(err) {
		return nil, err
	}
	if err != nil {
		live = nil
	}
	if written := c.expect.Newer(expect.KeyOf(want), live); written != nil {
		return written, nil
	}
	if live != nil {
		return live, nil
	}
	if childKind.Names != nil && !registry.NameTaken(childKind.Names, want.GetNamespace(), want.GetName()) {
		return nil, nil
	}
	live, err = c.opts.Dynamic.Resource(childKind.GVR).Namespace(want.GetNamespace()).Get(ctx, want.GetName(), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading %s/%s: %w", want.GetKind(), want.GetName(), err)
	}
	return live, nil
}

// expectChild records a child stencil created or changed, stripped as the
// cache holds it, until the cache shows it (expectations): done is what
// Writing returned before the write. Its event is quiet, and queues
// nothing, unless entry's templates read live children: the sync that
// wrote it took what the write returned for its status, and only such a
// render sees the child.
func (c *Reconciler) expectChild(ch childSync, written *unstructured.Unstructured, done func(*unstructured.Unstructured, bool) bool) {
	u, _ := c.TransformChild(written.DeepCopy())
	c.expected(ch.key, done(u.(*unstructured.Unstructured), !ch.entry.Set.ReadsLive()))
}

// expected queues key again when an event held while one of its writes
// was on its way was not that write's quiet event (expect.Writes.Writing).
func (c *Reconciler) expected(key Key, requeue bool) {
	if requeue && c.opts.Enqueue != nil {
		c.opts.Enqueue(key)
	}
}

// createByApply creates a child no object of its name is known to hold,
// with a server-side apply that is not forced. Should a foreign object of
// that name have appeared since the caches last saw none, the apply fails
// with a conflict on any field stencil sets that the other writer holds
// with another value, atomically, instead of overwriting it as a forced
// apply would; stencil reports OwnershipConflict. (An object that already
// has a controller cannot get a second one either: the API server refuses
// two controller references.)
func (c *Reconciler) createByApply(ctx context.Context, ch childSync) (*unstructured.Unstructured, bool, error) {
	want := ch.want
	created, err := ch.children.Create(ctx, ch.parent, ch.childKind.GVR, want)
	if apierrors.IsConflict(err) {
		return nil, true, nil
	}
	if err == nil && len(created.GetManagedFields()) > 1 {
		// It existed, held by others in fields stencil does not set, and is
		// now co-written: log it loudly; the next sync reports the conflict
		// if it has another controller.
		klog.FromContext(ctx).Error(nil, "Created child shares its fields with other writers: it existed before", "kind", want.GetKind(), "child", klog.KObj(want))
	}
	return created, false, err
}

// prune deletes this parent's children that the templates no longer render.
// The UID precondition makes sure a same-named object created meanwhile is
// never deleted.
func (c *Reconciler) prune(ctx context.Context, p *pass, rendered map[childRef]bool) ([]string, error) {
	var pruned []string
	kinds := c.reg.ChildKinds()
	slices.SortStableFunc(kinds, func(a, b *registry.Child) int {
		return cmp.Or(cmp.Compare(pruneRank(a.GVK.GroupKind()), pruneRank(b.GVK.GroupKind())),
			cmp.Compare(a.GVK.String(), b.GVK.String()))
	})
	children, errs := cachedChildren(kinds, p.parent)
	for _, oc := range children {
		childKind, child := oc.childKind, oc.obj
		if rendered[childRef{GVK: childKind.GVK, Name: child.GetName()}] {
			continue
		}
		uid := child.GetUID()
		if c.expect.Pruned(expect.KeyOf(child), uid) {
			// Deleted by an earlier sync; the cache has not shown it yet.
			continue
		}
		if err := c.mayWrite(child.GetNamespace()); err != nil {
			return pruned, errors.Join(errs, err)
		}
		err := p.children.Delete(ctx, p.parent, childKind.GVR, child)
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			// That object is gone already (the UID precondition failed):
			// the cache has yet to show it.
			c.expect.Deleted(expect.KeyOf(child), uid)
			continue
		}
		if isForbidden(err) {
			// Reported as the resource's Forbidden, with one event.
			errs = errors.Join(errs, err)
			continue
		}
		if err != nil {
			c.warning(p.parent, reasonPruneFailed, fmt.Sprintf("Pruning %s/%s: %v", childKind.GVK.Kind, child.GetName(), err))
			errs = errors.Join(errs, fmt.Errorf("pruning %s/%s: %w", childKind.GVK.Kind, child.GetName(), err))
			continue
		}
		c.expect.Deleted(expect.KeyOf(child), uid)
		c.opts.Metrics.childWrites.WithLabelValues(p.entry.Label, childKind.GVK.Kind, verbDelete).Inc()
		pruned = append(pruned, childKind.GVK.Kind+"/"+child.GetName())
		klog.FromContext(ctx).V(2).Info("Pruned child", "kind", childKind.GVK.Kind, "child", klog.KObj(child))
	}
	return pruned, errs
}

// childChanges are the writes of one sync, recorded as one event.
type childChanges struct {
	created, updated, pruned []string
}

// any says the sync changed a child.
func (ch childChanges) any() bool { return len(ch.created)+len(ch.updated)+len(ch.pruned) > 0 }

// recordChanges records one Normal event naming every child the sync
// created, updated or pruned, and none for a sync that changed nothing: an
// event is a request too, and one per child is noise.
func (c *Reconciler) recordChanges(parent *unstructured.Unstructured, ch childChanges) {
	var parts []string
	reasons := map[string]bool{}
	for _, p := range []struct {
		reason string
		names  []string
	}{{reasonCreated, ch.created}, {reasonUpdated, ch.updated}, {reasonPruned, ch.pruned}} {
		if len(p.names) > 0 {
			parts = append(parts, p.reason+" "+strings.Join(p.names, ", "))
			reasons[p.reason] = true
		}
	}
	if len(parts) == 0 {
		return
	}
	reason := reasonUpdated
	if len(reasons) == 1 {
		for r := range reasons {
			reason = r
		}
	}
	c.writer.Event(parent, corev1.EventTypeNormal, reason, strings.Join(parts, "; "))
}

// pruneRank orders prunes so that nothing is left pointing at what is
// already gone: first what routes or scales to a workload (Ingress,
// Service, HPA, PDB, NetworkPolicy), then the workloads, then what they
// use (ConfigMaps, Secrets, claims, accounts, roles), then anything else.
func pruneRank(gk schema.GroupKind) int {
	switch gk.Kind {
	case "Ingress", "HTTPRoute", "Service", "HorizontalPodAutoscaler", "PodDisruptionBudget", "NetworkPolicy", "ServiceMonitor":
		return 0
	case "Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job", "CronJob":
		return 1
	case "ConfigMap", "Secret", "PersistentVolumeClaim", "ServiceAccount", "RoleBinding", "Role":
		return 2
	}
	return 3
}
