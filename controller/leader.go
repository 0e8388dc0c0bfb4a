package controller

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"
)

// runLeaderElected runs the workers only while this replica holds the Lease.
// Losing the Lease ends Run with an error so the process restarts clean,
// rather than keep working beside a new leader.
func (c *Controller) runLeaderElected(ctx context.Context) error {
	le := c.opts.LeaderElection
	if c.opts.Kube == nil {
		return errors.New("leader election needs Options.Kube")
	}
	id := le.Identity
	if id == "" {
		host, err := os.Hostname()
		if err != nil {
			return fmt.Errorf("leader election identity: %w", err)
		}
		// The suffix keeps two processes on one host (or a restarted pod
		// whose old Lease has not expired) from taking each other for the leader.
		id = host + "_" + string(uuid.NewUUID())
	}
	logger := klog.FromContext(ctx)
	const leaseDuration, renewDeadline = 15 * time.Second, 10 * time.Second
	c.health.standby.Store(true)
	var runErr error
	lost := false
	// The elector's context is not the process's: on SIGTERM the workers
	// drain first and only then is the Lease released (cancel below), so
	// that no other replica starts writing while this one still does. The
	// elector also runs OnStartedLeading in a goroutine of its own and does
	// not wait for it: done does.
	leCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	// Every write first asks the lock whether the Lease is surely still
	// held (see fencedLock); the first refusal ends the leadership at once,
	// as a lost Lease does, rather than after the elector's renew deadline.
	lock := &fencedLock{
		Interface: &resourcelock.LeaseLock{
			LeaseMeta:  metav1.ObjectMeta{Namespace: le.Namespace, Name: le.Name},
			Client:     c.opts.Kube.CoordinationV1(),
			LockConfig: resourcelock.ResourceLockConfig{Identity: id},
		},
		renewDeadline: renewDeadline,
		onTrip: func() {
			logger.Info("The Lease was not renewed in time: stopping before the next write", "renewDeadline", renewDeadline)
			cancel()
		},
	}
	// Set before the workers start, read by them and by the event sink.
	c.fence = lock.allow
	done := make(chan struct{})
	var started atomic.Bool
	stopStandby := context.AfterFunc(ctx, func() {
		if !started.Load() {
			cancel() // a standby has nothing to drain
		}
	})
	defer stopStandby()
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   leaseDuration,
		RenewDeadline:   renewDeadline,
		RetryPeriod:     2 * time.Second,
		ReleaseOnCancel: true,
		Name:            le.Name,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(leaderCtx context.Context) {
				started.Store(true)
				defer close(done)
				logger.Info("Acquired the Lease", "lease", klog.KRef(le.Namespace, le.Name), "identity", id)
				c.health.standby.Store(false)
				// The workers stop on SIGTERM (ctx) or when the Lease is
				// lost (leaderCtx); only the first drains.
				workCtx, stop := context.WithCancel(leaderCtx)
				defer stop()
				unhook := context.AfterFunc(ctx, stop)
				defer unhook()
				runErr = c.runWorkers(workCtx, func() bool { return ctx.Err() == nil })
				if ctx.Err() != nil {
					// Drained on SIGTERM: write the last events while the
					// Lease is still held (the sink is fenced), then release.
					c.events.flush(logger, 5*time.Second)
				}
				cancel()
			},
			OnStoppedLeading: func() {
				if ctx.Err() == nil {
					lost = true
				}
			},
		},
	})
	if err != nil {
		return fmt.Errorf("leader election: %w", err)
	}
	elector.Run(leCtx)
	if started.Load() {
		<-done
	}
	if lost && runErr == nil {
		return errors.New("lost the leader-election Lease")
	}
	return runErr
}
