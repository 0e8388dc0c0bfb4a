package ring

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	coordinationclient "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/klog/v2"

	"stencil.dev/stencil/controller/ha"
	"stencil.dev/stencil/controller/registry"
)

// A member at work: Run joins the ring, builds the informers for its first
// share, runs the controller's workers (Options.Work) and, beside them, the
// ring loop (its Lease renewed, the ring read, each new view adopted) and
// the reshard loop (share.go); on SIGTERM it drains, then leaves.

// Options configures a member of a ring and what it runs.
type Options struct {
	// Name names the ring.
	Name string
	// Namespace holds the members' Leases.
	Namespace string
	// Identity names this member (default: hostname and a UUID).
	Identity string
	// Leases reads and writes the members' Leases.
	Leases coordinationclient.LeasesGetter
	// Metadata lists and watches the names of the namespaces the ring
	// divides.
	Metadata metadata.Interface
	// Registry holds the informers, rebuilt for each new share (Reshard).
	Registry *registry.Registry
	// Timings are the Leases' durations.
	Timings ha.Timings
	// Metrics receives the ring's metrics.
	Metrics *Metrics
	// Attach hands the member's State to the controller before anything
	// may write: its workers and its write fence ask it from then on.
	Attach func(*State)
	// Work runs the workers until ctx ends, then drains them unless
	// leaseLost reports that the member's Lease lapsed.
	Work func(ctx context.Context, leaseLost func() bool) error
	// EnqueueAll queues every cached resource again.
	EnqueueAll func()
	// Drained runs once the workers drained, while the Lease is still
	// valid, before the member leaves: the last events are written.
	Drained func(logger klog.Logger)
}

// errLeaseLost ends Run when the ring Lease lapsed.
var errLeaseLost = errors.New("the ring Lease was not renewed in time")

// ringReads is how many times per retry period a member reads the ring's
// Leases: a Lease that expired, or a view a member published, is seen
// within a quarter of the period, so a handover after a kill -9 takes the
// Lease and about a second more, not the Lease and up to three periods.
const ringReads = 4

// runner is one Run: the member's State and what its loops share.
type runner struct {
	o     Options
	state *State
	// namespaces lists the names of the namespaces that exist, sorted.
	namespaces func() []string
	// serverFilters says whether the API server serves sharded list and
	// watch (serverFiltersShards).
	serverFilters bool
}

// Run runs the workers as a member of a ring, from the first view on,
// until ctx ends (drain, then leave the ring) or the member's Lease lapses
// (stop at once, and return an error that says so).
func Run(ctx context.Context, o Options) error {
	id, err := ha.Identity(o.Identity)
	if err != nil {
		return fmt.Errorf("ring identity: %w", err)
	}
	logger := klog.LoggerWithValues(klog.FromContext(ctx), "ring", o.Name, "identity", id)
	ctx = klog.NewContext(ctx, logger)
	t := o.Timings
	m := &Member{Leases: o.Leases, Namespace: o.Namespace, Ring: o.Name, Identity: id,
		LeaseDuration: t.Lease, RenewDeadline: t.Renew}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	rs := NewState(m, id, func() {
		logger.Info("The ring Lease was not renewed in time: stopping before the next write", "renewDeadline", t.Renew)
		stop()
	})
	o.Attach(rs)

	namespaces, err := watchNamespaces(runCtx, o.Metadata, t.Lease)
	if err != nil {
		return err
	}
	if err := m.Join(ctx, ""); err != nil {
		return err
	}
	logger.Info("Joined the ring", "lease", klog.KRef(o.Namespace, m.LeaseName()))
	r := &runner{o: o, state: rs, namespaces: namespaces, serverFilters: serverFiltersShards(ctx, m)}
	snap, err := m.Observe(ctx)
	if err != nil {
		return err
	}
	rs.Adopt(snap, namespaces(), time.Now())
	o.Metrics.set(rs)
	if err := m.Renew(ctx, rs.ViewID()); err != nil {
		return err
	}
	// Before Work starts the informers: they are built for this share
	// from the first list. Members started together (a Deployment's pods)
	// rarely see each other here; the ring loop compares every view it
	// adopts with the share watched, and reshards until they match.
	if err := r.reshard(ctx); err != nil {
		return err
	}
	// The Lease is renewed until the workers have drained after SIGTERM:
	// the loops end after Work returns, not with ctx.
	loopCtx, stopLoops := context.WithCancel(context.WithoutCancel(ctx))
	defer stopLoops()
	reshard := make(chan struct{}, 1)
	var loops sync.WaitGroup
	loops.Go(func() { r.ringLoop(loopCtx, reshard) })
	loops.Go(func() { r.reshardLoop(loopCtx, reshard) })

	err = o.Work(runCtx, rs.Tripped)
	stopLoops()
	loops.Wait()
	if rs.Tripped() {
		return errLeaseLost
	}
	// Drained: write the last events while the Lease is valid, then leave,
	// so that the others take this share at once.
	o.Drained(logger)
	leaveCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), t.Renew)
	defer cancel()
	if lerr := m.Leave(leaveCtx); lerr != nil {
		logger.Info("Did not delete the ring Lease; the others take the share once it expires", "err", lerr)
	} else {
		logger.Info("Left the ring")
	}
	return err
}

// ringLoop renews the member's Lease every retry period and reads the ring
// ringReads times as often, adopting each new view (members, or their
// division of the namespaces that exist) and requeueing everything once
// it settles.
func (r *runner) ringLoop(ctx context.Context, reshard chan<- struct{}) {
	logger := klog.FromContext(ctx)
	rs, retry := r.state, r.o.Timings.Retry
	tick := time.NewTicker(retry / ringReads)
	defer tick.Stop()
	renewed := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		// Checked before renewing: a member paused past its Lease must not
		// renew it on resume, or the others would count it live again.
		if !rs.Member().Valid() {
			rs.Trip()
			return
		}
		if time.Since(renewed) >= retry-retry/(2*ringReads) {
			renewed = time.Now()
			if err := rs.Member().Renew(ctx, rs.ViewID()); err != nil && ctx.Err() == nil {
				logger.Error(err, "Renewing the ring Lease")
			}
		}
		snap, err := rs.Member().Observe(ctx)
		if err != nil {
			if ctx.Err() == nil {
				logger.Error(err, "Reading the ring")
			}
			continue
		}
		// Checked again: a member paused during the list reads every other
		// Lease as expired, and must stop, not adopt a view without them.
		if !rs.Member().Valid() {
			rs.Trip()
			return
		}
		if err := rs.Member().Sweep(ctx); err != nil && ctx.Err() == nil {
			logger.Info("Could not delete an expired ring Lease; trying again", "err", err)
		}
		viewChanged, _ := rs.Adopt(snap, r.namespaces(), time.Now())
		if viewChanged {
			_, held, of := rs.View()
			logger.Info("Ring view changed", "members", snap.Live, "view", rs.ViewID(), "namespaces", held, "of", of)
			// Publish at once: the others wait for it.
			renewed = time.Now()
			if err := rs.Member().Renew(ctx, rs.ViewID()); err != nil && ctx.Err() == nil {
				logger.Error(err, "Publishing the ring view")
			}
		}
		// Every tick, not only when the share changes: the first view
		// may differ from the one the informers were built for, and a
		// reshard may have failed.
		if rs.NeedsReshard() {
			select {
			case reshard <- struct{}{}:
			default:
			}
		}
		if took, ok := rs.Settle(time.Now()); ok {
			logger.Info("Ring view adopted by every member: writing for this share", "view", rs.ViewID(), "took", took.Round(time.Millisecond))
			r.o.Metrics.handedOver(took)
			r.o.EnqueueAll()
		}
		r.o.Metrics.set(rs)
	}
}
