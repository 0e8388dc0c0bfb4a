// Package plan is the planner behind "stencil diff": what a config would
// change in the live cluster, writing nothing, and the report of it in
// text or JSON.
//
// The choice a newcomer may question: the plan is the controller's own
// Sync, run once over every resource, with a Writer that asks the API
// server for a dry run of each write and records it instead of sending
// it. The planner builds the same registry of caches the controller reads
// (one LIST per watched resource and child kind), so no decision (what is
// paused, what waits, what is refused or pruned, what a rollout holds) is
// made twice, and the plan cannot disagree with the writes. It runs from
// CI against any cluster, without a running controller.
package plan

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/metadata"

	"stencil.dev/stencil/config"
	"stencil.dev/stencil/controller/reads"
	"stencil.dev/stencil/controller/reconcile"
	"stencil.dev/stencil/controller/reconcile/status"
	"stencil.dev/stencil/controller/reconcile/transform"
	"stencil.dev/stencil/controller/registry"
	"stencil.dev/stencil/controller/requeue"
	"stencil.dev/stencil/templates"
)

// Actions of a child in a diff.
const (
	actionCreate = "create"
	actionUpdate = "update"
	actionPrune  = "prune"
)

// reasonRenderFailed is the reason of a resource whose render fails.
const reasonRenderFailed = status.ReasonRenderFailed

// reasonRenderKilled is the reason of a resource whose render killed its
// worker: a render failure too.
const reasonRenderKilled = status.ReasonRenderKilled

// Planner plans one config against the live cluster.
type Planner struct {
	// Config is the config to plan, Sets its templates, one Set per entry.
	Config *config.Config
	Sets   []*templates.Set
	// Dynamic reads the live objects and sends the dry runs; Metadata
	// caches the names of the child kinds' objects; Mapper maps kinds to
	// resources.
	Dynamic  dynamic.Interface
	Metadata metadata.Interface
	Mapper   meta.RESTMapper
	// Impersonate returns the client that dry-runs as an entry's
	// identity (controller.Impersonators.Client); nil dry-runs every
	// write as the plan's own user.
	Impersonate func(user string) (dynamic.Interface, error)
	// Authorize reviews a read an identity makes of what a tenant names
	// (reads.Reviews.Allowed); nil refuses every such read.
	Authorize reads.Authorize
	// Namespace, when set, plans that namespace's resources only.
	Namespace string
	// ManageCRDs plans the generated CRDs as run --manage-crds applies
	// them.
	ManageCRDs bool
	// Workers is how many resources are planned in parallel.
	Workers int
	// CacheSyncTimeout bounds the wait for the caches (default 2m).
	CacheSyncTimeout time.Duration
	// Progress, when set, gets a progress line rewritten in place.
	Progress io.Writer
	// Warn gets what the plan skips and why.
	Warn io.Writer
}

// Run fills the caches the controller would read, then syncs every
// resource the config serves once, d.Workers in parallel, through a
// recorder. Any error but one a resource's status would report stops it: a
// partial plan would read as a complete one.
func (d *Planner) Run(ctx context.Context) (*Report, error) {
	if d.CacheSyncTimeout <= 0 {
		d.CacheSyncTimeout = 2 * time.Minute
	}
	rec := newRecorder(d.Dynamic, d.Impersonate)
	reg, rc, err := reconcile.Wire(ctx, registry.Options{
		Dynamic: d.Dynamic, Metadata: d.Metadata, Mapper: d.Mapper, Namespace: d.Namespace,
		Hooks: registry.Hooks{
			ParentTransform: transform.Parent,
			Served: func(entry *registry.Parent) {
				if entry.Served {
					rec.served(entry)
				}
			},
		},
	}, reconcile.Options{
		Dynamic: d.Dynamic, Writer: rec, Authorize: d.Authorize, Metrics: reconcile.NewMetrics(prometheus.NewRegistry()),
		Enqueue: func(reconcile.Key) {},
		// The status a sync would write, written at once: the plan has
		// no second sync to wait for.
		FirstStatusDelay: -1,
		// A resource a rollout holds is listed as held, with what it
		// gets when it moves.
		PlanHeld: true,
	}, d.Config, d.Sets)
	if err != nil {
		return nil, err
	}
	crds, err := d.planCRDs(ctx)
	if err != nil {
		return nil, err
	}
	runCtx, stop := context.WithCancel(ctx)
	defer func() {
		// The informers end before the plan returns: nothing of it runs on.
		stop()
		reg.Wait()
	}()
	if err := reg.StartAndWait(ctx, runCtx, d.CacheSyncTimeout); err != nil {
		return nil, err
	}

	var keys []reconcile.Key
	for _, res := range d.Config.Resources {
		entry := reg.Parent(res.GVR())
		if entry == nil || !entry.Served {
			// Its CRD is not installed: the controller waits for it, and
			// there is nothing of it to diff.
			if d.Warn != nil {
				fmt.Fprintf(d.Warn, "stencil diff: %s is not served (is its CRD installed?): nothing to diff\n", res)
			}
			continue
		}
		names := reg.Keys(res.GVR())
		sort.Slice(names, func(a, b int) bool { return names[a].String() < names[b].String() })
		for _, n := range names {
			keys = append(keys, reconcile.Key{GVR: res.GVR(), NamespacedName: n})
		}
	}
	if err := d.syncAll(ctx, rc, rec, keys); err != nil {
		return nil, err
	}
	report := rec.report(keys)
	report.Children = append(crds, report.Children...)
	return report, nil
}

// planCRDs says what "run --manage-crds" would do to the CRDs the config
// generates: reconcile.PlanCRDs, the controller's own decision, printed.
func (d *Planner) planCRDs(ctx context.Context) ([]childDiff, error) {
	if !d.ManageCRDs {
		return nil, nil
	}
	changes, err := reconcile.PlanCRDs(ctx, d.Dynamic, templates.Entries(d.Sets))
	if err != nil {
		return nil, err
	}
	var out []childDiff
	for _, ch := range changes {
		c := childDiff{Parent: parentRef{Resource: registry.CRDResource.Resource, Name: ch.Want.GetName()},
			Kind: ch.Want.GetKind(), Name: ch.Want.GetName(), Action: actionCreate}
		if ch.Live != nil {
			c.Action, c.Changes = actionUpdate, objectChanges(ch.Live.Object, ch.Result.Object, false)
		}
		out = append(out, c)
	}
	return out, nil
}

// syncAll runs Sync once for every key, d.Workers at a time. A sync's
// error stops the plan unless the recorder holds the failure it reports.
func (d *Planner) syncAll(ctx context.Context, rc *reconcile.Reconciler, rec *recorder, keys []reconcile.Key) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	next := make(chan reconcile.Key)
	var done atomic.Int64
	var wg sync.WaitGroup
	for range min(d.Workers, max(len(keys), 1)) {
		wg.Go(func() {
			for key := range next {
				_, err := requeue.Split(rc.Sync(ctx, key))
				if err != nil && !rec.reported(key) {
					cancel(fmt.Errorf("%s: %w", key, err))
					continue
				}
				done.Add(1)
			}
		})
	}
	stopProgress := d.showProgress(&done, len(keys))
feed:
	for _, key := range keys {
		select {
		case next <- key:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	stopProgress()
	return context.Cause(ctx)
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

// oneLine joins the lines of a (joined) error message.
func oneLine(s string) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(s, "\n", "; ")), " ")
}
