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

// TestAnEventBeforeItsWriteReturnsIsHeld: the watch event of a write
// can arrive before the write's response. Held while the write is on its
// way, it is decided when the write returns: the quiet write's own event
// queues nothing (and nothing is left expected); another writer's
// version, a write that failed, or a write that is not quiet, queue the
// resource again.
func TestAnEventBeforeItsWriteReturnsIsHeld(t *testing.T) {
	key := KeyOf(deployment("a", "1"))
	for _, c := range []struct {
		name    string
		events  []string
		written string // "" the write failed
		quiet   bool
		requeue bool
	}{
		{name: "its own event, quiet", events: []string{"12"}, written: "12", quiet: true},
		{name: "its own event, not quiet", events: []string{"12"}, written: "12", requeue: true},
		{name: "another writer's version first", events: []string{"11", "12"}, written: "12", quiet: true, requeue: true},
		{name: "the write failed", events: []string{"11"}, requeue: true},
		{name: "no event yet", written: "12", quiet: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := New()
			done := w.Writing(key)
			for _, rv := range c.events {
				if !w.Observe(deployment("a", rv)) {
					t.Errorf("the event at %s, while a write was on its way, was not held", rv)
				}
			}
			var written *unstructured.Unstructured
			if c.written != "" {
				written = deployment("a", c.written)
			}
			if got := done(written, c.quiet); got != c.requeue {
				t.Errorf("done: requeue %v, want %v", got, c.requeue)
			}
			// Once the write returned, its event, if still to come, is
			// expected as before: quiet when the write was.
			seen := len(c.events) > 0 && c.events[len(c.events)-1] == c.written
			if c.written != "" && !seen {
				if got := w.Observe(deployment("a", c.written)); got != c.quiet {
					t.Errorf("the write's event after it returned: quiet %v, want %v", got, c.quiet)
				}
			}
			if seen && w.Newer(key, deployment("a", "11")) != nil {
				t.Error("a write whose event was seen is still expected")
			}
			if len(w.writing) != 0 {
				t.Errorf("%d writes still on their way", len(w.writing))
			}
		})
	}
}
