package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"stencil.dev/stencil/controller/registry"
	"stencil.dev/stencil/controller/ring"
)

// A ring of replicas (stencil run --ring NAME, docs/operating.md "A ring of replicas"):
// every member runs workers at once, each for its share of the namespaces.
// The arithmetic and the handover rule are package ring's; this file runs
// them: the member's Lease, the view it acts on, the fence every write
// passes, and the informers rebuilt for a new share.
//
// A view change waits for the syncs in flight (each holds syncs for
// reading) before it takes effect, and only then is the new view
// published: that is the "stopped writing under the old view" of the
// handover rule, without which two members could write for one namespace.

// Ring configures membership of a ring of replicas.
type Ring struct {
	// Name names the ring; empty runs no ring.
	Name string
	// Namespace holds the members' Leases.
	Namespace string
	// Identity names this member (default: hostname and a UUID).
	Identity string
}

// errNotHolder stops a write for a namespace this ring member does not
// hold now, or holds under a view some member has not adopted yet. The key
// is dropped: the namespace's holder syncs it, and this member syncs every
// resource again once its view is adopted.
var errNotHolder = errors.New("not writing: namespace not held by this ring member under a view every member adopted")

// errRingLease stops every write of a member whose own Lease was not
// renewed in time: the others may have taken its share.
var errRingLease = errors.New("not writing: this ring member's Lease was not renewed in time")

// ringState is a member's view of its ring.
type ringState struct {
	member *ring.Member
	self   string

	// syncs is held for reading by every sync; a view change takes it for
	// writing, and so waits for the syncs in flight.
	syncs sync.RWMutex

	mu        sync.Mutex
	view      ring.View
	share     []ring.Range
	published map[string]string
	// watched is the share the informers were last built for (nil before
	// the first Reshard). It can differ from share: a view adopted while
	// the informers still watch the last one (a reshard under way, or one
	// that failed). The fence allows no write until they match: a sync
	// decides from the caches, and caches of another share either miss
	// the namespace or hold what another member writes.
	watched    []ring.Range
	hasWatched bool
	// settled: every live member published view; changed is when view
	// became this member's.
	settled bool
	changed time.Time

	tripped atomic.Bool
	once    sync.Once
	onTrip  func()
}

// allow is the ring's write fence (Controller.fence).
func (r *ringState) allow(ns string) error {
	if r.tripped.Load() {
		return errRingLease
	}
	if !r.member.Valid() {
		r.trip()
		return errRingLease
	}
	r.mu.Lock()
	view, published := r.view, r.published
	r.mu.Unlock()
	if ok, why := ring.MayWrite(r.self, view, true, published, ns); !ok {
		return fmt.Errorf("%w: %s", errNotHolder, why)
	}
	if r.needsReshard() {
		return fmt.Errorf("%w: this member's informers do not watch the adopted view's share yet", errNotHolder)
	}
	return nil
}

// needsReshard reports whether the informers watch another share than the
// adopted view's.
func (r *ringState) needsReshard() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return !r.hasWatched || !slices.Equal(r.share, r.watched)
}

// resharded records that the informers now watch share.
func (r *ringState) resharded(share []ring.Range) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.watched, r.hasWatched = share, true
}

// trip ends the membership: no write after it, and the workers stop.
func (r *ringState) trip() {
	r.tripped.Store(true)
	if r.onTrip != nil {
		r.once.Do(r.onTrip)
	}
}

// holds reports whether ns is in this member's current share.
func (r *ringState) holds(ns string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return ring.Holds(r.share, ns)
}

// viewID is the ID of the view this member acts on.
func (r *ringState) viewID() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.view.ID()
}

// adopt records snap; when its live members differ from the view's, it
// waits for the syncs in flight and switches to the new view. It reports
// whether the view changed, and whether this member's share did.
func (r *ringState) adopt(snap ring.Snapshot, now time.Time) (viewChanged, shareChanged bool) {
	next := ring.NewView(snap.Live)
	r.mu.Lock()
	r.published = snap.Published
	same := slices.Equal(next.Members, r.view.Members) && r.view.Members != nil
	r.mu.Unlock()
	if same {
		return false, false
	}
	r.syncs.Lock()
	defer r.syncs.Unlock()
	r.mu.Lock()
	defer r.mu.Unlock()
	share := next.Share(r.self)
	shareChanged = !slices.Equal(share, r.share)
	r.view, r.share, r.settled, r.changed = next, share, false, now
	return true, shareChanged
}

// settle reports, once per view, that every live member published it:
// from then on this member writes for its share. It returns how long the
// handover took.
func (r *ringState) settle(now time.Time) (time.Duration, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.settled || r.view.Members == nil {
		return 0, false
	}
	id := r.view.ID()
	for _, m := range r.view.Members {
		if m != r.self && r.published[m] != id {
			return 0, false
		}
	}
	r.settled = true
	return now.Sub(r.changed), true
}

// shard is the registry's share for this member's current ranges, and
// those ranges.
func (r *ringState) shard(serverFilters bool) (*registry.Shard, []ring.Range) {
	share := r.shareNow()
	s := &registry.Shard{Holds: func(ns string) bool { return ring.Holds(share, ns) }}
	if serverFilters {
		s.Selector = ring.Selector(share)
	}
	return s, share
}

// reshard builds the informers for the member's current share and records
// it as watched.
func (c *Controller) reshard(ctx context.Context, rs *ringState, serverFilters bool) error {
	s, share := rs.shard(serverFilters)
	if err := c.reg.Reshard(ctx, s); err != nil {
		return err
	}
	rs.resharded(share)
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
	id, err := replicaIdentity(ro.Identity)
	if err != nil {
		return fmt.Errorf("ring identity: %w", err)
	}
	logger := klog.LoggerWithValues(klog.FromContext(ctx), "ring", ro.Name, "identity", id)
	ctx = klog.NewContext(ctx, logger)
	t := c.leaseTimings
	m := &ring.Member{Leases: c.opts.Kube.CoordinationV1(), Namespace: ro.Namespace, Ring: ro.Name, Identity: id,
		LeaseDuration: t.lease, RenewDeadline: t.renew}
	rs := &ringState{member: m, self: id}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	rs.onTrip = func() {
		logger.Info("The ring Lease was not renewed in time: stopping before the next write", "renewDeadline", t.renew)
		stop()
	}
	c.ring, c.fence = rs, rs.allow

	if err := m.Join(ctx, ""); err != nil {
		return err
	}
	logger.Info("Joined the ring", "lease", klog.KRef(ro.Namespace, m.LeaseName()))
	serverFilters := c.serverFiltersShards(ctx, m)
	snap, err := m.Observe(ctx)
	if err != nil {
		return err
	}
	rs.adopt(snap, time.Now())
	c.ringGauges(rs)
	if err := m.Renew(ctx, rs.viewID()); err != nil {
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
	loops.Go(func() { c.ringLoop(loopCtx, rs, reshard) })
	loops.Go(func() { c.reshardLoop(loopCtx, rs, serverFilters, reshard) })

	err = c.runWorkers(runCtx, rs.tripped.Load)
	stopLoops()
	loops.Wait()
	if rs.tripped.Load() {
		return errRingLeaseLost
	}
	// Drained: write the last events while the Lease is valid, then leave,
	// so that the others take this share at once.
	c.events.flush(logger, 5*time.Second)
	leaveCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), t.renew)
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

// ringLoop renews the member's Lease and reads the ring every retry period,
// adopting each new view and requeueing everything once it settles.
func (c *Controller) ringLoop(ctx context.Context, rs *ringState, reshard chan<- struct{}) {
	logger := klog.FromContext(ctx)
	tick := time.NewTicker(c.leaseTimings.retry)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		// Checked before renewing: a member paused past its Lease must not
		// renew it on resume, or the others would count it live again.
		if !rs.member.Valid() {
			rs.trip()
			return
		}
		if err := rs.member.Renew(ctx, rs.viewID()); err != nil && ctx.Err() == nil {
			logger.Error(err, "Renewing the ring Lease")
		}
		snap, err := rs.member.Observe(ctx)
		if err != nil {
			if ctx.Err() == nil {
				logger.Error(err, "Reading the ring")
			}
			continue
		}
		viewChanged, _ := rs.adopt(snap, time.Now())
		if viewChanged {
			logger.Info("Ring members changed", "members", snap.Live, "view", rs.viewID())
			c.ringGauges(rs)
			// Publish at once: the others wait for it.
			if err := rs.member.Renew(ctx, rs.viewID()); err != nil && ctx.Err() == nil {
				logger.Error(err, "Publishing the ring view")
			}
		}
		// Every tick, not only when the share changes: the first view
		// may differ from the one the informers were built for, and a
		// reshard may have failed.
		if rs.needsReshard() {
			select {
			case reshard <- struct{}{}:
			default:
			}
		}
		if took, ok := rs.settle(time.Now()); ok {
			logger.Info("Ring view adopted by every member: writing for this share", "view", rs.viewID(), "took", took.Round(time.Millisecond))
			c.opts.Metrics.ringHandovers.Inc()
			c.opts.Metrics.ringHandoverSeconds.Observe(took.Seconds())
			c.EnqueueAll()
		}
	}
}

// reshardLoop rebuilds the informers for the member's share each time it
// changes; changes that come while one runs are taken together.
func (c *Controller) reshardLoop(ctx context.Context, rs *ringState, serverFilters bool, reshard <-chan struct{}) {
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
		if !rs.needsReshard() {
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
			case <-time.After(c.leaseTimings.retry):
			}
			again = true
			continue
		}
		// The new informers reported their objects as they listed them,
		// before the swap: a sync then read the old caches, found a resource
		// of a namespace just gained missing, and dropped it. Now they are
		// the registry's.
		c.EnqueueAll()
		logger.Info("Watching the new share", "share", fmt.Sprintf("%.1f%%", 100*ring.Share(rs.shareNow())), "took", time.Since(start).Round(time.Millisecond))
		// The view may have moved on while the informers synced.
		again = rs.needsReshard()
	}
}

// shareNow returns the member's current ranges.
func (r *ringState) shareNow() []ring.Range {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.share)
}

// ringGauges sets the ring's metrics from rs.
func (c *Controller) ringGauges(rs *ringState) {
	rs.mu.Lock()
	members, share := len(rs.view.Members), ring.Share(rs.share)
	rs.mu.Unlock()
	c.opts.Metrics.ringMembers.Set(float64(members))
	c.opts.Metrics.ringShare.Set(share)
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
