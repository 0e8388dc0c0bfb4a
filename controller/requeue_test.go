package controller

import (
	"errors"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2/ktesting"
)

// TestHandleErrSchedulesWhatTheSyncAsks: handleErr alone turns a sync's
// answer into queue operations. A requeue beside a terminal error is
// scheduled once, with no back-off; a requeue beside a transient error is
// scheduled and the error backs off too; a plain success asks nothing.
func TestHandleErrSchedulesWhatTheSyncAsks(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	key := Key{GVR: webappGVR, NamespacedName: types.NamespacedName{Namespace: "ns", Name: "demo"}}
	for _, tc := range []struct {
		name         string
		err          error
		wantQueued   bool
		wantRequeues int
	}{
		{"success", nil, false, 0},
		{"success, look again", requeueAfter(nil, time.Millisecond), true, 0},
		{"terminal, look again", requeueAfter(terminal(errors.New("invalid")), time.Millisecond), true, 0},
		{"transient, look again", requeueAfter(errors.New("timeout"), time.Millisecond), true, 1},
	} {
		f := newFixture(t)
		f.newController(ctx)
		f.c.handleErr(ctx, key, "webapps.apps.example.com", tc.err)
		if got := f.c.queue.NumRequeues(key); got != tc.wantRequeues {
			t.Errorf("%s: %d back-offs, want %d", tc.name, got, tc.wantRequeues)
		}
		deadline := time.Now().Add(2 * time.Second)
		for f.c.queue.Len() == 0 && tc.wantQueued && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		if queued := f.c.queue.Len() > 0; queued != tc.wantQueued {
			t.Errorf("%s: queued %v, want %v", tc.name, queued, tc.wantQueued)
		}
	}
	if d, err := splitRequeue(requeueAfter(terminal(errors.New("x")), time.Second)); d != time.Second || !IsTerminal(err) {
		t.Errorf("splitRequeue = %v, %v; want 1s and the terminal error", d, err)
	}
}
