package controller

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"stencil.dev/stencil/controller/ha"
	"stencil.dev/stencil/controller/ring"
)

// A ring of replicas (stencil run --ring NAME, docs/operating.md "A ring
// of replicas"): every member runs workers at once, each for its share of
// the namespaces. The member's view and fence, the arithmetic and the
// handover rule are package ring's; this file runs them:
// the member's Lease and its loops, and the informers rebuilt for a new
// share.

// Ring configures membership of a ring of replicas.
type Ring struct {
	// Name names the ring; empty runs no ring.
	Name string
	// Namespace holds the members' Leases.
	Namespace string
	// Identity names this member (default: hostname and a UUID).
	Identity string
}

// reshard builds the informers for the member's current share and records
// it as watched.
func (c *Controller) reshard(ctx context.Context, rs *ring.State, serverFilters bool) error {
	s, share := rs.Shard(serverFilters)
	if err := c.reg.Reshard(ctx, s); err != nil {
		return err
	}
	rs.Resharded(share)
	return nil
}

// runRing runs the workers as a member of a ring, from the first view on,
// until ctx ends (drain, then leave the ring) or the member's Lease lapses
// (stop at once; errRingLeaseLost).
func (c *Controller) runRing(ctx context.Context) error {
	ro := c.opts.Ring
	if c.opts.Kube == nil {
		return errors.New("a ring needs Options.Kube")
	}
	id, err := ha.Identity(ro.Identity)
	if err != nil {
		return fmt.Errorf("ring identity: %w", err)
	}
	logger := klog.LoggerWithValues(klog.FromContext(ctx), "ring", ro.Name, "identity", id)
	ctx = klog.NewContext(ctx, logger)
	t := c.leaseTimings
	m := &ring.Member{Leases: c.opts.Kube.CoordinationV1(), Namespace: ro.Namespace, Ring: ro.Name, Identity: id,
		LeaseDuration: t.Lease, RenewDeadline: t.Renew}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	rs := ring.NewState(m, id, func() {
		logger.Info("The ring Lease was not renewed in time: stopping before the next write", "renewDeadline", t.Renew)
		stop()
	})
	c.ring, c.fence = rs, rs.Allow

	namespaces, err := c.watchNamespaces(runCtx)
	if err != nil {
		return err
	}
	if err := m.Join(ctx, ""); err != nil {
		return err
	}
	logger.Info("Joined the ring", "lease", klog.KRef(ro.Namespace, m.LeaseName()))
	serverFilters := c.serverFiltersShards(ctx, m)
	snap, err := m.Observe(ctx)
	if err != nil {
		return err
	}
	rs.Adopt(snap, namespaces(), time.Now())
	c.ringGauges(rs)
	if err := m.Renew(ctx, rs.ViewID()); err != nil {
		return err
	}
	// Before Start: the informers are built for this share from the first
	// list. Members started together (a Deployment's pods) rarely see each
	// other here; the ring loop compares every view it adopts with the
	// share watched, and reshards until they match.
	if err := c.reshard(ctx, rs, serverFilters); err != nil {
		return err
	}
	// The Lease is renewed until the workers have drained after SIGTERM:
	// the loops end after runWorkers returns, not with ctx.
	loopCtx, stopLoops := context.WithCancel(context.WithoutCancel(ctx))
	defer stopLoops()
	reshard := make(chan struct{}, 1)
	var loops sync.WaitGroup
	loops.Go(func() { c.ringLoop(loopCtx, rs, namespaces, reshard) })
	loops.Go(func() { c.reshardLoop(loopCtx, rs, serverFilters, reshard) })

	err = c.runWorkers(runCtx, rs.Tripped)
	stopLoops()
	loops.Wait()
	if rs.Tripped() {
		return errRingLeaseLost
	}
	// Drained: write the last events while the Lease is valid, then leave,
	// so that the others take this share at once.
	c.events.flush(logger, 5*time.Second)
	leaveCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), t.Renew)
	defer cancel()
	if lerr := m.Leave(leaveCtx); lerr != nil {
		logger.Info("Did not delete the ring Lease; the others take the share once it expires", "err", lerr)
	} else {
		logger.Info("Left the ring")
	}
	return err
}

// errRingLeaseLost ends Run when the ring Lease lapsed.
var errRingLeaseLost = errors.New("the ring Lease was not renewed in time")

// ringReads is how many times per retry period a member reads the ring's
// Leases: a Lease that expired, or a view a member published, is seen
// within a quarter of the period, so a handover after a kill -9 takes the
// Lease and about a second more, not the Lease and up to three periods.
const ringReads = 4

// ringLoop renews the member's Lease every retry period and reads the ring
// ringReads times as often, adopting each new view (members, or their
// division of the namespaces listed by namespaces) and requeueing
// everything once it settles.
func (c *Controller) ringLoop(ctx context.Context, rs *ring.State, namespaces func() []string, reshard chan<- struct{}) {
	logger := klog.FromContext(ctx)
	tick := time.NewTicker(c.leaseTimings.Retry / ringReads)
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
		if time.Since(renewed) >= c.leaseTimings.Retry-c.leaseTimings.Retry/(2*ringReads) {
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
		viewChanged, _ := rs.Adopt(snap, namespaces(), time.Now())
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
			c.opts.Metrics.ringHandovers.Inc()
			c.opts.Metrics.ringHandoverSeconds.Observe(took.Seconds())
			c.EnqueueAll()
		}
		c.ringGauges(rs)
	}
}

// reshardLoop rebuilds the informers for the member's share each time it
// changes; changes that come while one runs are taken together.
func (c *Controller) reshardLoop(ctx context.Context, rs *ring.State, serverFilters bool, reshard <-chan struct{}) {
	logger := klog.FromContext(ctx)
	again := false
	for {
		if !again {
			select {
			case <-ctx.Done():
				return
			case <-reshard:
			}
		}
		again = false
		if !rs.NeedsReshard() {
			continue
		}
		start := time.Now()
		if err := c.reshard(ctx, rs, serverFilters); err != nil {
			if ctx.Err() != nil {
				return
			}
			logger.Error(err, "Watching the new share; trying again")
			select {
			case <-ctx.Done():
				return
			case <-time.After(c.leaseTimings.Retry):
			}
			again = true
			continue
		}
		// The new informers reported their objects as they listed them,
		// before the swap: a sync then read the old caches, found a resource
		// of a namespace just gained missing, and dropped it. Now they are
		// the registry's.
		c.EnqueueAll()
		_, held, of := rs.View()
		logger.Info("Watching the new share", "namespaces", held, "of", of, "ranges", len(rs.ShareNow()), "took", time.Since(start).Round(time.Millisecond))
		// The view may have moved on while the informers synced.
		again = rs.NeedsReshard()
	}
}

// ringGauges sets the ring's metrics from rs.
func (c *Controller) ringGauges(rs *ring.State) {
	members, held, of := rs.View()
	share := 0.0
	if of > 0 {
		share = float64(held) / float64(of)
	}
	m := c.opts.Metrics
	m.ringMembers.Set(float64(members))
	m.ringShare.Set(share)
	m.ringNamespaces.Set(float64(held))
	settled := 0.0
	if rs.Settled() {
		settled = 1
	}
	m.ringSettled.Set(settled)
}

// watchNamespaces runs an informer of the cluster's namespaces, names
// only, until ctx ends, and returns once it has listed them: the ring
// divides the namespaces that exist (controller/ring). It returns a
// function that lists their names, sorted.
func (c *Controller) watchNamespaces(ctx context.Context) (func() []string, error) {
	if c.opts.Metadata == nil {
		return nil, errors.New("a ring needs Options.Metadata to list the namespaces it divides")
	}
	inf := metadatainformer.NewFilteredMetadataInformer(c.opts.Metadata,
		schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}, metav1.NamespaceAll, 0, cache.Indexers{}, nil).Informer()
	if err := inf.SetTransform(func(obj any) (any, error) {
		if m, ok := obj.(*metav1.PartialObjectMetadata); ok {
			return &metav1.PartialObjectMetadata{TypeMeta: m.TypeMeta, ObjectMeta: metav1.ObjectMeta{Name: m.Name, ResourceVersion: m.ResourceVersion}}, nil
		}
		return obj, nil
	}); err != nil {
		return nil, fmt.Errorf("namespace informer: %w", err)
	}
	// A list the API server refuses (RBAC without namespaces list and
	// watch) is retried by the reflector for ever: give up after a Lease
	// duration and say why, rather than hang before joining.
	var lastErr atomic.Pointer[error]
	_ = inf.SetWatchErrorHandlerWithContext(func(ctx context.Context, _ *cache.Reflector, err error) {
		lastErr.Store(&err)
		klog.FromContext(ctx).Info("Listing the namespaces the ring divides; retrying", "err", err)
	})
	go inf.RunWithContext(ctx)
	waitCtx, cancel := context.WithTimeout(ctx, c.leaseTimings.Lease)
	defer cancel()
	if !cache.WaitForCacheSync(waitCtx.Done(), inf.HasSynced) {
		err := cmp.Or(ctx.Err(), errors.New("not listed within the Lease duration"))
		if last := lastErr.Load(); last != nil {
			err = *last
		}
		return nil, fmt.Errorf("listing the namespaces the ring divides (stencil rbac grants list and watch on namespaces): %w", err)
	}
	return func() []string {
		names := inf.GetStore().ListKeys()
		slices.Sort(names)
		return names
	}, nil
}

// serverFiltersShards finds out whether the API server serves sharded
// list and watch (KEP-5866, alpha in 1.36): it lists the ring's Leases with
// a selector that matches no namespace it holds. A server without the
// feature ignores the selector and returns this member's own Lease.
func (c *Controller) serverFiltersShards(ctx context.Context, m *ring.Member) bool {
	logger := klog.FromContext(ctx)
	h := ring.Hash(m.Namespace)
	probe := []ring.Range{{Start: h + 1, End: h + 2}}
	if h+2 == 0 || h+1 == 0 {
		probe = []ring.Range{{Start: 0, End: 1}}
	}
	list, err := c.opts.Kube.CoordinationV1().Leases(m.Namespace).List(ctx, metav1.ListOptions{
		LabelSelector: ring.LabelRing + "=" + m.Ring, ShardSelector: ring.Selector(probe)})
	switch {
	case err != nil:
		logger.Info("The API server refused a shard selector: filtering the watches here", "err", err)
		return false
	case len(list.Items) > 0:
		logger.Info("The API server does not serve sharded list and watch: filtering the watches here")
		return false
	}
	logger.Info("The API server serves sharded list and watch: it filters the watches")
	return true
}
