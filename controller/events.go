package controller

import (
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
)

// eventSink is the API event sink with two additions the broadcaster lacks.
// It tells when the events recorded so far have been written: shutting the
// broadcaster down drops what its writer goroutine has not written yet, and
// it gives no signal of its own. And it writes only while mayWrite allows: a
// replica that lost the leader-election Lease drops the events still queued
// instead of writing beside the new leader, and a ring member drops those of
// a namespace it no longer holds.
type eventSink struct {
	record.EventSink
	fence func(ns string) error
	// busy counts writes in flight; last is when the latest one ended
	// (Unix nanoseconds).
	busy, last atomic.Int64
}

func (s *eventSink) write(e *corev1.Event, do func() (*corev1.Event, error)) (*corev1.Event, error) {
	if err := s.fence(e.Namespace); err != nil {
		// Dropped, as if written: the recorder would otherwise retry it.
		return e, nil
	}
	s.busy.Add(1)
	defer func() {
		s.last.Store(time.Now().UnixNano())
		s.busy.Add(-1)
	}()
	return do()
}

// Create writes a new event.
func (s *eventSink) Create(e *corev1.Event) (*corev1.Event, error) {
	return s.write(e, func() (*corev1.Event, error) { return s.EventSink.Create(e) })
}

// Update replaces an event.
func (s *eventSink) Update(e *corev1.Event) (*corev1.Event, error) {
	return s.write(e, func() (*corev1.Event, error) { return s.EventSink.Update(e) })
}

// Patch updates an event's count and timestamps.
func (s *eventSink) Patch(e *corev1.Event, data []byte) (*corev1.Event, error) {
	return s.write(e, func() (*corev1.Event, error) { return s.EventSink.Patch(e, data) })
}

// eventQuiet is how long the sink must stay idle to count as flushed. The
// broadcaster hands an event to the writer goroutine within microseconds,
// and the writer goes from one to the next without pause, so a pause this
// long means the queue is empty.
const eventQuiet = 200 * time.Millisecond

// flush waits, at most max, until no event write is in flight and none
// ended in the last eventQuiet: the events recorded before it was called
// have been written (or given up by the recorder).
func (s *eventSink) flush(logger klog.Logger, max time.Duration) {
	if s == nil {
		return
	}
	start := time.Now()
	deadline := start.Add(max)
	for time.Now().Before(deadline) {
		if s.busy.Load() == 0 && time.Since(time.Unix(0, s.last.Load())) >= eventQuiet && time.Since(start) >= eventQuiet {
			logger.V(2).Info("Events flushed", "took", time.Since(start).Round(time.Millisecond))
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	logger.Info("Events not all written before shutdown", "waited", max)
}
