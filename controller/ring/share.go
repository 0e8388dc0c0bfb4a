package ring

import (
	"context"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
)

// A member watches only its share of the namespaces: the registry's
// informers are rebuilt for each new share (registry.Reshard, which asks
// the API server for the share's ranges where it serves sharded list and
// watch and always drops what falls outside before the caches), and the
// fence refuses every write while they watch another share than the
// adopted view's (State.NeedsReshard).

// reshard builds the informers for the member's current share and records
// it as watched.
func (r *runner) reshard(ctx context.Context) error {
	s, share := r.state.Shard(r.serverFilters)
	if err := r.o.Registry.Reshard(ctx, s); err != nil {
		return err
	}
	r.state.Resharded(share)
	return nil
}

// reshardLoop rebuilds the informers for the member's share each time it
// changes; changes that come while one runs are taken together.
func (r *runner) reshardLoop(ctx context.Context, reshard <-chan struct{}) {
	logger := klog.FromContext(ctx)
	rs := r.state
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
		if err := r.reshard(ctx); err != nil {
			if ctx.Err() != nil {
				return
			}
			logger.Error(err, "Watching the new share; trying again")
			select {
			case <-ctx.Done():
				return
			case <-time.After(r.o.Timings.Retry):
			}
			again = true
			continue
		}
		// The new informers report their objects as they list them, before
		// the swap, while a sync still reads the old caches and drops a
		// resource of a namespace just gained as missing: now that they are
		// the registry's, every resource is queued again.
		r.o.EnqueueAll()
		_, held, of := rs.View()
		logger.Info("Watching the new share", "namespaces", held, "of", of, "ranges", len(rs.ShareNow()), "took", time.Since(start).Round(time.Millisecond))
		// The view may have moved on while the informers synced.
		again = rs.NeedsReshard()
	}
}

// serverFiltersShards finds out whether the API server serves sharded
// list and watch (KEP-5866, alpha in 1.36): it lists the ring's Leases with
// a selector that matches no namespace it holds. A server without the
// feature ignores the selector and returns this member's own Lease.
func serverFiltersShards(ctx context.Context, m *Member) bool {
	logger := klog.FromContext(ctx)
	h := Hash(m.Namespace)
	probe := []Range{{Start: h + 1, End: h + 2}}
	if h+2 == 0 || h+1 == 0 {
		probe = []Range{{Start: 0, End: 1}}
	}
	list, err := m.Leases.Leases(m.Namespace).List(ctx, metav1.ListOptions{
		LabelSelector: LabelRing + "=" + m.Ring, ShardSelector: Selector(probe)})
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
