package expect

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
)

func deployment(uid types.UID, rv string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": "web", "namespace": "ns"}}}
	u.SetUID(uid)
	u.SetResourceVersion(rv)
	return u
}

// TestAWriteIsExpectedUntilTheCacheShowsIt: a cached view older than the
// write reads as the write; the informer event that shows it (or a newer
// version, or another object of the name) ends the expectation.
func TestAWriteIsExpectedUntilTheCacheShowsIt(t *testing.T) {
	w := New()
	written := deployment("a", "12")
	w.Wrote(written)
	if got := w.Newer(KeyOf(written), deployment("a", "9")); got != written {
		t.Fatalf("cache at 9, write at 12: Newer = %v, want the write", got)
	}
	if got := w.Newer(KeyOf(written), nil); got != written {
		t.Fatal("cache without the object: Newer did not return the write")
	}
	w.Observe(deployment("a", "9"))
	if w.Len() != 1 {
		t.Fatal("an event older than the write ended its expectation")
	}
	w.Observe(deployment("a", "12"))
	if w.Len() != 0 || w.Newer(KeyOf(written), deployment("a", "9")) != nil {
		t.Fatal("the event of the write did not end its expectation")
	}
	// Another object of the name: what stencil wrote is gone.
	w.Wrote(written)
	if got := w.Newer(KeyOf(written), deployment("b", "3")); got != nil {
		t.Errorf("another object of the name: Newer = %v, want nil", got)
	}
	// A version that is not an integer is never held to be older.
	w.Wrote(deployment("a", "x12"))
	if got := w.Newer(KeyOf(written), deployment("a", "9")); got != nil {
		t.Errorf("a non-integer resourceVersion: Newer = %v, want nil", got)
	}
}

// TestAPruneIsExpectedUntilTheDeleteEvent: a pruned object the cache still
// shows is not deleted again; its delete event ends the expectation, and a
// new object of the name is not taken for the pruned one.
func TestAPruneIsExpectedUntilTheDeleteEvent(t *testing.T) {
	w := New()
	old := deployment("a", "5")
	w.Deleted(KeyOf(old), old.GetUID())
	if !w.Pruned(KeyOf(old), "a") || w.Pruned(KeyOf(old), "b") {
		t.Fatal("Pruned does not tell the pruned object from another")
	}
	w.Observe(deployment("a", "5"))
	if w.Len() != 1 {
		t.Fatal("the pruned object's own update ended the expectation")
	}
	w.Gone(old)
	if w.Len() != 0 {
		t.Fatal("the delete event did not end the expectation")
	}
	w.Deleted(KeyOf(old), old.GetUID())
	w.Observe(deployment("c", "7"))
	if w.Len() != 0 {
		t.Error("a new object of the name did not end the prune's expectation")
	}
}

// TestExpectationsExpire: past the TTL the cache is trusted again, and
// Sweep drops what no event will ever end.
func TestExpectationsExpire(t *testing.T) {
	now := time.Unix(0, 0)
	w := New()
	w.now = func() time.Time { return now }
	written := deployment("a", "12")
	w.Wrote(written)
	now = now.Add(expectationTTL + time.Second)
	if got := w.Newer(KeyOf(written), deployment("a", "9")); got != nil {
		t.Errorf("past the TTL: Newer = %v, want nil", got)
	}
	w.Wrote(written)
	now = now.Add(expectationTTL + time.Second)
	w.Sweep()
	if w.Len() != 0 {
		t.Errorf("Sweep left %d expired expectations", w.Len())
	}
}

// TestAQuietWritesOwnEventIsQuiet: the event of the very version a quiet
// write returned is quiet; a later version, another object of the name,
// a write that was not quiet, or one whose cache a sync read while it
// was expected (Looking, before or after the cache caught up) is not.
func TestAQuietWritesOwnEventIsQuiet(t *testing.T) {
	for _, tc := range []struct {
		name  string
		write func(w *Writes, u *unstructured.Unstructured)
		event *unstructured.Unstructured
		quiet bool
	}{
		{"its own version", (*Writes).WroteQuiet, deployment("a", "12"), true},
		{"a later version", (*Writes).WroteQuiet, deployment("a", "13"), false},
		{"another object of the name", (*Writes).WroteQuiet, deployment("b", "12"), false},
		{"a write that is not quiet", (*Writes).Wrote, deployment("a", "12"), false},
		{"a sync looked meanwhile", func(w *Writes, u *unstructured.Unstructured) {
			w.WroteQuiet(u)
			w.Looking(KeyOf(u))
		}, deployment("a", "12"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := New()
			tc.write(w, deployment("a", "12"))
			if w.Observe(deployment("a", "9")) {
				t.Error("an event older than the write is quiet")
			}
			if got := w.Observe(tc.event); got != tc.quiet {
				t.Errorf("Observe = %v, want %v", got, tc.quiet)
			}
			if w.Len() != 0 {
				t.Error("the write's event did not end its expectation")
			}
		})
	}
	// Looking at a key with nothing expected changes nothing.
	w := New()
	w.Looking(KeyOf(deployment("a", "1")))
	if w.Len() != 0 {
		t.Error("Looking made an expectation")
	}
}
