package controller

import (
	"context"
	"errors"
	"fmt"
	"os"
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
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: le.Namespace, Name: le.Name},
		Client:     c.opts.Kube.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: id},
	}
	logger := klog.FromContext(ctx)
	c.health.standby.Store(true)
	var runErr error
	lost := false
	leCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   15 * time.Second,
		RenewDeadline:   10 * time.Second,
		RetryPeriod:     2 * time.Second,
		ReleaseOnCancel: true,
		Name:            le.Name,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) {
				logger.Info("Acquired the Lease", "lease", klog.KRef(le.Namespace, le.Name), "identity", id)
				c.health.standby.Store(false)
				runErr = c.runWorkers(ctx)
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
	if lost && runErr == nil {
		return errors.New("lost the leader-election Lease")
	}
	return runErr
}
