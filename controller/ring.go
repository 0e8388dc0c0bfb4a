package controller

import (
	"context"
	"errors"
	"time"

	"k8s.io/klog/v2"

	"stencil.dev/stencil/controller/ring"
)

// A ring of replicas (stencil run --ring NAME, docs/operating.md "A ring
// of replicas"): every member runs workers at once, each for its share of
// the namespaces. The ring, all of it, is package ring's; this file hands
// it the controller's clients, registry, workers and event sink.

// Ring configures membership of a ring of replicas.
type Ring struct {
	// Name names the ring; empty runs no ring.
	Name string
	// Namespace holds the members' Leases.
	Namespace string
	// Identity names this member (default: hostname and a UUID).
	Identity string
}

// runRing runs the workers as a member of a ring (ring.Run) until ctx
// ends or the member's Lease lapses.
func (c *Controller) runRing(ctx context.Context) error {
	ro := c.opts.Ring
	if c.opts.Kube == nil {
		return errors.New("a ring needs Options.Kube")
	}
	return ring.Run(ctx, ring.Options{
		Name: ro.Name, Namespace: ro.Namespace, Identity: ro.Identity,
		Leases: c.opts.Kube.CoordinationV1(), Metadata: c.opts.Metadata, Registry: c.reg,
		Timings: c.leaseTimings, Metrics: c.opts.Metrics.ring,
		// Set before the workers start, read by them and by the event sink.
		Attach: func(rs *ring.State) {
			c.ring, c.fence = rs, rs.Allow
			// Reads follow the share: another member watches the rest.
			c.rec.HoldReads(rs.Holds)
		},
		Work:       c.runWorkers,
		EnqueueAll: func() { c.EnqueueAll() },
		Drained:    func(logger klog.Logger) { c.events.flush(logger, 5*time.Second) },
	})
}
