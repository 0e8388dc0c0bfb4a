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

// leaseTimings are the leader election's durations (see
// leaderelection.LeaderElectionConfig); tests shorten them.
type leaseTimings struct {
	lease, renew, retry time.Duration
}

// defaultLeaseTimings are client-go's recommended values.
var defaultLeaseTimings = leaseTimings{lease: 15 * time.Second, renew: 10 * time.Second, retry: 2 * time.Second}

// runLeaderElected runs the workers only while this replica holds the Lease.
// Losing the Lease ends Run with an error so the process restarts clean,
// rather than keep working beside a new leader.
func (c *Controller) runLeaderElected(ctx context.Context) error {
	le := c.opts.LeaderElection
	if c.opts.Kube == nil {
		return errors.New("leader election needs Options.Kube")
	}
	id, err := replicaIdentity(le.Identity)
	if err != nil {
		return fmt.Errorf("leader election identity: %w", err)
	}
	logger := klog.FromContext(ctx)
	t := c.leaseTimings
	lock := &fencedLock{
		Interface: &resourcelock.LeaseLock{
			LeaseMeta:  metav1.ObjectMeta{Namespace: le.Namespace, Name: le.Name},
			Client:     c.opts.Kube.CoordinationV1(),
			LockConfig: resourcelock.ResourceLockConfig{Identity: id},
		},
		renewDeadline: t.renew,
	}
	// Set before the workers start, read by them and by the event sink.
	c.fence = func(string) error { return lock.allow() }
	c.health.standby.Store(true)
	return leadWithLease(ctx, lock, le.Name, t, func(workCtx context.Context) error {
		logger.Info("Acquired the Lease", "lease", klog.KRef(le.Namespace, le.Name), "identity", id)
		c.health.standby.Store(false)
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

// replicaIdentity is given, or the hostname with a UUID: the suffix keeps
// two processes on one host (or a restarted pod whose old Lease has not
// expired) from taking each other for the holder.
func replicaIdentity(given string) (string, error) {
	if given != "" {
		return given, nil
	}
	host, err := os.Hostname()
	if err != nil {
		return "", err
	}
	return host + "_" + string(uuid.NewUUID()), nil
}

// errLeaseLost ends Run when the Lease was lost rather than given up.
var errLeaseLost = errors.New("lost the leader-election Lease")

// leadWithLease runs work while lock's Lease is held, and returns when ctx
// is cancelled and work has returned, or when the Lease is lost
// (errLeaseLost, unless work failed first). work's context ends on either.
//
// It releases the Lease itself, after work has drained, instead of setting
// client-go's ReleaseOnCancel: the elector's release() reads the Lease to
// learn its resourceVersion but decides whether it is the holder from the
// record it observed before, so a leader paused past its Lease and resumed
// overwrote the new leader's Lease with an empty holder, at the fresh
// resourceVersion that optimistic concurrency cannot refuse, and a third
// replica took it over while the new leader still wrote: two leaders. See
// fencedLock.release for the rule that replaces it.
func leadWithLease(ctx context.Context, lock *fencedLock, name string, t leaseTimings, work func(ctx context.Context) error) error {
	logger := klog.FromContext(ctx)
	var runErr error
	// lost says the leadership ended without this process giving it up.
	var lost atomic.Bool
	// The elector's context is not the process's: on SIGTERM the workers
	// drain first and only then does the elector stop (cancel below), so
	// that no other replica starts writing while this one still does. The
	// elector also runs OnStartedLeading in a goroutine of its own and does
	// not wait for it: done does.
	leCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	// Every write first asks the lock whether the Lease is surely still
	// held; the first refusal ends the leadership at once, as a lost Lease
	// does, rather than after the elector's renew deadline.
	lock.onTrip = func() {
		logger.Info("The Lease was not renewed in time: stopping before the next write", "renewDeadline", lock.renewDeadline)
		cancel()
	}
	done := make(chan struct{})
	var started atomic.Bool
	stopStandby := context.AfterFunc(ctx, func() {
		if !started.Load() {
			cancel() // a standby has nothing to drain
		}
	})
	defer stopStandby()
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:          lock,
		LeaseDuration: t.lease,
		RenewDeadline: t.renew,
		RetryPeriod:   t.retry,
		// See above and fencedLock.release: never client-go's release.
		ReleaseOnCancel: false,
		Name:            name,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(leaderCtx context.Context) {
				started.Store(true)
				defer close(done)
				// work stops on SIGTERM (ctx) or when the Lease is lost
				// (leaderCtx); only the first drains.
				workCtx, stop := context.WithCancel(leaderCtx)
				defer stop()
				unhook := context.AfterFunc(ctx, stop)
				defer unhook()
				runErr = work(workCtx)
				cancel()
			},
			OnStoppedLeading: func() {
				if ctx.Err() == nil {
					lost.Store(true)
				}
			},
		},
	})
	if err != nil {
		return fmt.Errorf("leader election: %w", err)
	}
	elector.Run(leCtx)
	if !started.Load() {
		return runErr
	}
	<-done
	if lost.Load() {
		if runErr == nil {
			runErr = errLeaseLost
		}
		return runErr
	}
	// Given up on SIGTERM after the drain: hand the Lease over now rather
	// than leave the standby waiting for it to expire.
	relCtx, stopRel := context.WithTimeout(context.WithoutCancel(ctx), t.renew)
	defer stopRel()
	switch holder, err := lock.release(relCtx); {
	case err != nil:
		logger.Info("Did not release the Lease; a standby takes it over once it expires", "err", err)
	case holder == lock.Identity():
		logger.Info("Released the Lease")
	default:
		logger.Info("Not releasing the Lease: this replica no longer holds it", "holder", holder)
	}
	return runErr
}
