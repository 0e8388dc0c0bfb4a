package controller

import (
	"errors"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2/ktesting"

	"stencil.dev/stencil/controller/reconcile"
	"stencil.dev/stencil/controller/requeue"
)

// TestHandleErrSchedulesWhatTheSyncAsks: handleErr alone turns a sync's
// answer into queue operations. A requeue beside a terminal error is
// scheduled once, with no back-off; a requeue beside a transient error is
// scheduled and the error backs off too; a terminal error alone is
// dropped; a plain success asks nothing.
func TestHandleErrSchedulesWhatTheSyncAsks(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	key := reconcile.Key{GVR: webappGVR, NamespacedName: types.NamespacedName{Namespace: "ns", Name: "demo"}}
	for _, tc := range []struct {
		name         string
		err          error
		wantQueued   bool
		wantRequeues int
	}{
		{"success", nil, false, 0},
		{"terminal", requeue.Terminal(errors.New("invalid")), false, 0},
		{"success, look again", requeue.After(nil, time.Millisecond), true, 0},
		{"terminal, look again", requeue.After(requeue.Terminal(errors.New("invalid")), time.Millisecond), true, 0},
		{"transient, look again", requeue.After(errors.New("timeout"), time.Millisecond), true, 1},
	} {
		opts := Options{}
		opts.defaults()
		c := &Controller{opts: opts, queue: workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Key]())}
		c.handleErr(ctx, key, "webapps.apps.example.com", tc.err)
		if got := c.queue.NumRequeues(key); got != tc.wantRequeues {
			t.Errorf("%s: %d back-offs, want %d", tc.name, got, tc.wantRequeues)
		}
		deadline := time.Now().Add(2 * time.Second)
		for c.queue.Len() == 0 && tc.wantQueued && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		if queued := c.queue.Len() > 0; queued != tc.wantQueued {
			t.Errorf("%s: queued %v, want %v", tc.name, queued, tc.wantQueued)
		}
		c.queue.ShutDown()
	}
}
