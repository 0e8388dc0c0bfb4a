package controller

import (
	"context"
	"errors"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"

	"stencil.dev/stencil/controller/ha"
)

// runLeaderElected runs the workers only while this replica holds the Lease.
// Losing the Lease ends Run with an error so the process restarts clean,
// rather than keep working beside a new leader.
func (c *Controller) runLeaderElected(ctx context.Context) error {
	le := c.opts.LeaderElection
	if c.opts.Kube == nil {
		return errors.New("leader election needs Options.Kube")
	}
	id, err := ha.Identity(le.Identity)
	if err != nil {
		return fmt.Errorf("leader election identity: %w", err)
	}
	logger := klog.FromContext(ctx)
	t := c.leaseTimings
	lock := ha.NewFencedLock(&resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: le.Namespace, Name: le.Name},
		Client:     c.opts.Kube.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: id},
	}, t.Renew)
	// Set before the workers start, read by them and by the event sink.
	c.fence = func(string) error { return lock.Allow() }
	c.health.standby.Store(true)
	c.opts.Metrics.setLeader(false)
	return ha.Lead(ctx, lock, le.Name, t, func(workCtx context.Context) error {
		logger.Info("Acquired the Lease", "lease", klog.KRef(le.Namespace, le.Name), "identity", id)
		c.health.standby.Store(false)
		c.opts.Metrics.setLeader(true)
		// Not leading once the work ends: drained on SIGTERM before the
		// Lease is released, or cancelled when it was lost.
		defer c.opts.Metrics.setLeader(false)
		// In-flight work drains on SIGTERM (ctx) and is cancelled at once
		// when the Lease is lost: another replica may already be writing.
		err := c.runWorkers(workCtx, func() bool { return ctx.Err() == nil })
		if ctx.Err() != nil {
			// Drained on SIGTERM: write the last events while the Lease
			// is still held (the sink is fenced), then release.
			c.events.flush(logger, 5*time.Second)
		}
		return err
	})
}

// mayWrite returns nil when this replica may write for namespace ns:
// always without leader election or a ring; under leader election while its
// ha.FencedLock allows; in a ring while ring.State does.
func (c *Controller) mayWrite(ns string) error {
	if c.fence == nil {
		return nil
	}
	return c.fence(ns)
}
