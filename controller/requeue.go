package controller

import (
	"fmt"
	"time"
)

// A sync asks to be run again later (a conflict recheck, the end of a fight
// episode, a first status, a terminating namespace) by returning a
// requeueError; handleErr alone schedules it, beside what the error it
// wraps asks for (a back-off, or nothing). A sync never touches the queue
// itself, so what it asks is visible to its caller and its tests.

// requeueError asks to look at the resource again after a delay.
type requeueError struct {
	after time.Duration
	// err is what the sync returned besides; nil for a success.
	err error
}

func (e *requeueError) Error() string {
	if e.err != nil {
		return e.err.Error()
	}
	return fmt.Sprintf("look again in %s", e.after)
}

func (e *requeueError) Unwrap() error { return e.err }

// requeueAfter returns err asking also to look again after d; err itself
// when d is 0.
func requeueAfter(err error, d time.Duration) error {
	if d <= 0 {
		return err
	}
	return &requeueError{after: d, err: err}
}

// splitRequeue returns the delay err asks to look again after (0: none)
// and the error it wraps.
func splitRequeue(err error) (time.Duration, error) {
	if rq, ok := err.(*requeueError); ok {
		return rq.after, rq.err
	}
	return 0, err
}
