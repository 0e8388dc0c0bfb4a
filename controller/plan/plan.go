// Package plan is the planner behind "stencil diff": what a config would
// change in the live cluster, asked of the API server with dry-run applies,
// writing nothing, and the report of it in text or JSON.
//
// The choice a newcomer may question: the plan asks the API server (a
// dry-run apply per child, a LIST of the live objects) rather than
// computing from the controller's caches, so it runs from CI against any
// cluster without a running controller; where sync decides (what counts
// as refused, what is pruned, the revision annotation) it calls the same
// functions of package reconcile, so the two cannot disagree.
package plan

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/metadata"

	"stencil.dev/stencil/controller/reconcile"
	"stencil.dev/stencil/controller/reconcile/drift"
	"stencil.dev/stencil/controller/reconcile/status"
	"stencil.dev/stencil/controller/registry"
	"stencil.dev/stencil/templates"
	"stencil.dev/stencil/templates/view"
)

// Actions of a child in a diff.
const (
	actionCreate = "create"
	actionUpdate = "update"
	actionPrune  = "prune"
)

// Reasons of a resource the diff could not plan.
const (
	reasonRenderFailed = status.ReasonRenderFailed
	reasonApplyFailed  = status.ReasonApplyFailed
	reasonConflict     = status.ReasonOwnershipConflict
)

// Planner plans one config against the live cluster.
type Planner struct {
	// Sets are the config's templates, one Set per entry.
	Sets []*templates.Set
	// Dynamic reads the live objects and sends the dry runs; Metadata
	// lists the children; Mapper maps their kinds to resources.
	Dynamic  dynamic.Interface
	Metadata metadata.Interface
	Mapper   meta.RESTMapper
	// Namespace, when set, plans that namespace's resources only.
	Namespace string
	// Workers is how many resources are planned in parallel.
	Workers int
	// Progress, when set, gets a progress line rewritten in place.
	Progress io.Writer
	// Warn gets what the plan skips and why.
	Warn io.Writer

	// owned maps a parent's UID to the live children labelled with it.
	owned map[types.UID][]ownedChild
	// onChildren holds the sets whose revision the controller stamps on
	// each child (reconcile.RevisionOnChildren).
	onChildren map[*templates.Set]bool
}

// ownedChild is a live child found by its owner-uid label.
type ownedChild struct {
	gvk        schema.GroupVersionKind
	namespace  string
	name       string
	controller types.UID
}

// job is one custom resource to diff.
type job struct {
	set    *templates.Set
	parent *unstructured.Unstructured
}

// diffResult is what one resource contributes to the report.
type diffResult struct {
	children  []childDiff
	unchanged int
	failures  []failure
	waiting   []waiting
}

// Run lists every resource the config serves, then plans them with
// d.Workers in parallel. Any error but a render or apply failure of one
// resource stops it: a partial plan would read as a complete one.
func (d *Planner) Run(ctx context.Context) (*Report, error) {
	var jobs []job
	d.onChildren = map[*templates.Set]bool{}
	for _, set := range d.Sets {
		res := set.Resource()
		onChildren, err := reconcile.RevisionOnChildren(ctx, d.Dynamic, res)
		if err != nil {
			return nil, err
		}
		d.onChildren[set] = onChildren
		for _, ns := range registry.ScopeNamespaces(d.Namespace, res.Namespaces) {
			items, err := listAll(ctx, d.Dynamic.Resource(res.GVR()).Namespace(ns), res.LabelSelector().String())
			if apierrors.IsNotFound(err) {
				// Its CRD is not installed: the controller waits for it,
				// and there is nothing of it to diff.
				if d.Warn != nil {
					fmt.Fprintf(d.Warn, "stencil diff: %s is not served (is its CRD installed?): nothing to diff\n", res)
				}
				break
			}
			if err != nil {
				return nil, fmt.Errorf("listing %s: %w", res, err)
			}
			for i := range items {
				jobs = append(jobs, job{set: set, parent: &items[i]})
			}
		}
	}
	if err := d.listOwned(ctx); err != nil {
		return nil, err
	}

	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	results := make([]diffResult, len(jobs))
	next := make(chan int)
	var done atomic.Int64
	var wg sync.WaitGroup
	for range min(d.Workers, max(len(jobs), 1)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				r, err := d.diffOne(ctx, jobs[i])
				if err != nil {
					cancel(err)
					continue
				}
				results[i] = r
				done.Add(1)
			}
		}()
	}
	stopProgress := d.showProgress(&done, len(jobs))
feed:
	for i := range jobs {
		select {
		case next <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	stopProgress()
	if err := context.Cause(ctx); err != nil {
		return nil, err
	}

	report := &Report{Children: []childDiff{}, Failures: []failure{}}
	for _, r := range results {
		report.Children = append(report.Children, r.children...)
		report.Unchanged += r.unchanged
		report.Failures = append(report.Failures, r.failures...)
		report.Waiting = append(report.Waiting, r.waiting...)
	}
	return report, nil
}

// showProgress rewrites a progress line on d.Progress until the returned
// function is called, which clears it.
func (d *Planner) showProgress(done *atomic.Int64, total int) func() {
	if d.Progress == nil {
		return func() {}
	}
	stop := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				fmt.Fprint(d.Progress, "\r\033[K")
				return
			case <-tick.C:
				fmt.Fprintf(d.Progress, "\rstencil diff: %d/%d resources", done.Load(), total)
			}
		}
	}()
	return func() { close(stop); <-finished }
}

// listAll lists every object of a resource, a page at a time.
func listAll(ctx context.Context, client dynamic.ResourceInterface, selector string) ([]unstructured.Unstructured, error) {
	var items []unstructured.Unstructured
	err := eachPage(ctx, selector, func(ctx context.Context, opts metav1.ListOptions) (string, error) {
		list, err := client.List(ctx, opts)
		if err != nil {
			return "", err
		}
		items = append(items, list.Items...)
		return list.GetContinue(), nil
	})
	return items, err
}

// eachPage calls list with selector, 500 objects a page, until it returns
// no continue token.
func eachPage(ctx context.Context, selector string, list func(context.Context, metav1.ListOptions) (string, error)) error {
	opts := metav1.ListOptions{LabelSelector: selector, Limit: 500}
	for {
		next, err := list(ctx, opts)
		if err != nil || next == "" {
			return err
		}
		opts.Continue = next
	}
}

// listOwned finds the live children of every child kind the config
// renders, by stencil's owner-uid label, reading metadata only: what prune
// would delete needs no more. Like the controller's caches, each kind is
// listed wherever any entry may have children: sync prunes a child of any
// kind the config lists, not only of its own entry's kinds.
func (d *Planner) listOwned(ctx context.Context) error {
	d.owned = map[types.UID][]ownedChild{}
	var kinds []schema.GroupVersionKind
	namespaces := map[string]bool{}
	for _, set := range d.Sets {
		for _, gvk := range set.Kinds() {
			if !slices.Contains(kinds, gvk) {
				kinds = append(kinds, gvk)
			}
		}
		for _, ns := range registry.ScopeNamespaces(d.Namespace, set.Resource().Namespaces) {
			namespaces[ns] = true
		}
	}
	if namespaces[metav1.NamespaceAll] {
		namespaces = map[string]bool{metav1.NamespaceAll: true}
	}
	for _, gvk := range kinds {
		mapping, err := d.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if meta.IsNoMatchError(err) {
			// Not served: no child of the kind exists to prune.
			continue
		}
		if err != nil {
			return fmt.Errorf("looking up kind %s: %w", gvk, err)
		}
		for _, ns := range slices.Sorted(maps.Keys(namespaces)) {
			err := eachPage(ctx, templates.LabelOwnerUID, func(ctx context.Context, opts metav1.ListOptions) (string, error) {
				list, err := d.Metadata.Resource(mapping.Resource).Namespace(ns).List(ctx, opts)
				if err != nil {
					return "", err
				}
				for _, o := range list.Items {
					c := ownedChild{gvk: gvk, namespace: o.Namespace, name: o.Name}
					if ref := metav1.GetControllerOf(&o); ref != nil {
						c.controller = ref.UID
					}
					uid := types.UID(o.Labels[templates.LabelOwnerUID])
					d.owned[uid] = append(d.owned[uid], c)
				}
				return list.Continue, nil
			})
			if err != nil {
				return fmt.Errorf("listing %s: %w", mapping.Resource.Resource, err)
			}
		}
	}
	return nil
}

// diffOne renders one resource and asks the API server, for each child,
// what applying it would change. The error is for what stops the whole
// diff; a failure of this resource alone is in the result.
func (d *Planner) diffOne(ctx context.Context, j job) (diffResult, error) {
	res := j.set.Resource()
	parent := j.parent
	ref := parentRef{Resource: res.Resource, Namespace: parent.GetNamespace(), Name: parent.GetName()}
	var r diffResult
	fail := func(reason string, err error) (diffResult, error) {
		r.failures = append(r.failures, failure{Parent: ref, Reason: reason, Message: oneLine(err.Error())})
		return r, nil
	}
	if parent.GetDeletionTimestamp() != nil || parent.GetAnnotations()[reconcile.AnnotationPaused] == "true" {
		// The controller leaves these alone, and so would the new config.
		return r, nil
	}
	obj, err := view.NewObject(parent, res.GVR())
	if err != nil {
		return fail(reasonRenderFailed, err)
	}
	var live templates.Live
	if j.set.ReadsLive() {
		live = d.liveChildren(ctx, parent, j.set)
	}
	rendering, err := j.set.RenderWith(obj, live)
	if err != nil {
		return fail(reasonRenderFailed, err)
	}
	desired, extra := rendering.Children, rendering.Status
	if len(rendering.Waits) > 0 {
		msgs := make([]string, len(rendering.Waits))
		for i, w := range rendering.Waits {
			msgs[i] = w.String()
		}
		r.waiting = append(r.waiting, waiting{Parent: ref, Message: strings.Join(msgs, "; ")})
	}

	rendered := map[schema.GroupVersionKind]map[string]bool{}
	for _, want := range desired {
		gvk := want.GroupVersionKind()
		if rendered[gvk] == nil {
			rendered[gvk] = map[string]bool{}
		}
		rendered[gvk][want.GetName()] = true
		if d.onChildren[j.set] {
			drift.StampRevision(want, j.set.Revision())
		}
		c, reason, err := d.diffChild(ctx, parent, want)
		switch {
		case err != nil && reason == "":
			return r, err
		case err != nil:
			r.failures = append(r.failures, failure{Parent: ref, Reason: reason,
				Message: oneLine(fmt.Sprintf("%s/%s: %v", want.GetKind(), want.GetName(), err))})
		case c == nil:
			r.unchanged++
		default:
			c.Parent = ref
			r.children = append(r.children, *c)
		}
	}

	// Status: the fields the status template renders (kept as they are
	// while it waits).
	if changes := statusChanges(parent, status.TemplateStatus(parent, extra)); len(changes) > 0 && !rendering.StatusWaits {
		r.children = append(r.children, childDiff{Parent: ref, Kind: parent.GetKind(),
			Namespace: parent.GetNamespace(), Name: parent.GetName(), Action: actionUpdate, Changes: changes})
	}

	// Prune: live children of any kind the config lists (as sync prunes),
	// controlled by this resource, that the render no longer produces.
	var pruned []childDiff
	for _, c := range d.owned[parent.GetUID()] {
		if len(rendering.Waits) > 0 {
			// Nothing is pruned while a template waits, as sync does.
			break
		}
		if c.namespace != parent.GetNamespace() || c.controller != parent.GetUID() || rendered[c.gvk][c.name] {
			continue
		}
		pruned = append(pruned, childDiff{Parent: ref, Kind: c.gvk.Kind, Namespace: c.namespace, Name: c.name, Action: actionPrune})
	}
	sort.Slice(pruned, func(a, b int) bool {
		return pruned[a].Kind+"/"+pruned[a].Name < pruned[b].Kind+"/"+pruned[b].Name
	})
	r.children = append(r.children, pruned...)
	return r, nil
}

// liveChildren is templates.Live over parent's children in the cluster,
// each read from the API server the first time a template asks for it.
func (d *Planner) liveChildren(ctx context.Context, parent *unstructured.Unstructured, set *templates.Set) templates.Live {
	l := &planLive{ctx: ctx, d: d, parent: parent, read: map[string]*unstructured.Unstructured{}}
	if d.onChildren[set] {
		l.revision = set.Revision()
	}
	return l
}

// planLive reads the live children a render asks for.
type planLive struct {
	ctx      context.Context
	d        *Planner
	parent   *unstructured.Unstructured
	read     map[string]*unstructured.Unstructured
	revision string
}

// Child returns parent's live child of that kind and name: one of the
// children listed by its owner label, controlled by parent.
func (l *planLive) Child(kind, name string) (*unstructured.Unstructured, bool) {
	ref := kind + "/" + name
	if u, ok := l.read[ref]; ok {
		return u, u != nil
	}
	l.read[ref] = nil
	for _, c := range l.d.owned[l.parent.GetUID()] {
		if c.gvk.Kind != kind || c.name != name || c.namespace != l.parent.GetNamespace() || c.controller != l.parent.GetUID() {
			continue
		}
		mapping, err := l.d.Mapper.RESTMapping(c.gvk.GroupKind(), c.gvk.Version)
		if err != nil {
			return nil, false
		}
		u, err := l.d.Dynamic.Resource(mapping.Resource).Namespace(c.namespace).Get(l.ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, false
		}
		l.read[ref] = u
		return u, true
	}
	return nil, false
}

// Ready applies stencil's readiness rules (kstatus), as sync does.
func (l *planLive) Ready(u *unstructured.Unstructured) bool { return status.ReadinessOf(u).OK }

// Current reports whether live already is want's render, as sync does.
func (l *planLive) Current(want, live *unstructured.Unstructured) bool {
	return drift.Current(want, live, l.revision)
}

// diffChild asks what applying want would do: nil when nothing would
// change. An error with a reason is a failure of this child alone (the
// API server rejects it, or a foreign object holds its name); an error
// without one stops the diff.
func (d *Planner) diffChild(ctx context.Context, parent, want *unstructured.Unstructured) (*childDiff, string, error) {
	gvk := want.GroupVersionKind()
	mapping, err := d.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if meta.IsNoMatchError(err) {
		return nil, reasonApplyFailed, fmt.Errorf("kind %s is not served by the API server (is its CRD installed?)", gvk)
	}
	if err != nil {
		return nil, "", fmt.Errorf("looking up kind %s: %w", gvk, err)
	}
	client := d.Dynamic.Resource(mapping.Resource).Namespace(want.GetNamespace())
	c := &childDiff{Kind: want.GetKind(), Namespace: want.GetNamespace(), Name: want.GetName()}
	live, err := client.Get(ctx, want.GetName(), metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		live = nil
		c.Action = actionCreate
	case err != nil:
		return nil, "", fmt.Errorf("reading %s/%s: %w", want.GetKind(), want.GetName(), err)
	default:
		if ref := metav1.GetControllerOf(live); ref == nil || ref.UID != parent.GetUID() {
			return nil, reasonConflict, fmt.Errorf("exists and is not controlled by %s %s", parent.GetKind(), parent.GetName())
		}
		c.Action = actionUpdate
	}
	// A create is dry-run too: the API server may reject the object.
	result, err := reconcile.DryRunApply(ctx, client, want)
	if err != nil {
		if reconcile.IsRejected(err) {
			// Refused for its content (invalid, too large): this child
			// fails, as the controller's apply would, and the plan goes on.
			return nil, reasonApplyFailed, err
		}
		return nil, "", fmt.Errorf("dry-run apply of %s/%s: %w", want.GetKind(), want.GetName(), err)
	}
	if live == nil {
		return c, "", nil
	}
	// The revision annotation an earlier stencil left on a child goes with
	// its next write; the controller does not write for it (the applied
	// hash still matches), so it is no change to review. Where the
	// controller stamps the revision on children, it is one.
	_, stamped := want.GetAnnotations()[templates.AnnotationTemplateRevision]
	c.Changes = objectChanges(live.Object, result.Object, !stamped)
	if len(c.Changes) == 0 {
		return nil, "", nil
	}
	return c, "", nil
}

// oneLine joins the lines of a (joined) error message.
func oneLine(s string) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(s, "\n", "; ")), " ")
}
