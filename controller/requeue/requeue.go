// Package requeue holds the typed errors by which a sync says what should
// happen to its key next: look again after a delay (After), or not until
// the resource changes (Terminal). The controller's handleErr alone turns
// them into queue operations.
//
// The choice a newcomer may question: a requeue is an error value, not a
// queue call inside the sync, so what a sync asks for is visible to its
// caller and its tests, and one switch decides every retry, back-off and
// drop (as kro's pkg/requeue does).
package requeue

import (
	"errors"
	"fmt"
	"time"
)

// afterError asks to look at the resource again after a delay.
type afterError struct {
	after time.Duration
	// err is what the sync returned besides; nil for a success.
	err error
}

// Error returns the wrapped error's message, or says when to look again.
func (e *afterError) Error() string {
	if e.err != nil {
		return e.err.Error()
	}
	return fmt.Sprintf("look again in %s", e.after)
}

// Unwrap exposes the error the sync returned besides the requeue.
func (e *afterError) Unwrap() error { return e.err }

// After returns err asking also to look again after d (a conflict recheck,
// the end of a fight episode, a first status, a terminating namespace);
// err itself when d is 0.
func After(err error, d time.Duration) error {
	if d <= 0 {
		return err
	}
	return &afterError{after: d, err: err}
}

// Split returns the delay err asks to look again after (0: none) and the
// error it wraps.
func Split(err error) (time.Duration, error) {
	if rq, ok := err.(*afterError); ok {
		return rq.after, rq.err
	}
	return 0, err
}

// terminalError marks a failure that retrying cannot fix: bad template input,
// or an object the API server rejects as invalid. It is written to status
// and the key is not requeued until the resource changes.
type terminalError struct{ err error }

// Error returns the wrapped error's message unchanged.
func (e *terminalError) Error() string { return e.err.Error() }

// Unwrap exposes the cause to errors.Is and errors.As (NotFound, Invalid).
func (e *terminalError) Unwrap() error { return e.err }

// Terminal wraps err as terminal; nil stays nil.
func Terminal(err error) error {
	if err == nil {
		return nil
	}
	return &terminalError{err: err}
}

// IsTerminal reports whether err (or an error it wraps) is terminal.
func IsTerminal(err error) bool {
	var t *terminalError
	return errors.As(err, &t)
}
