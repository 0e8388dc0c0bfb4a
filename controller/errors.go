package controller

import (
	"errors"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// terminalError marks a failure that retrying cannot fix: bad template input,
// or an object the API server rejects as invalid. It is written to status
// and the key is not requeued until the resource changes.
type terminalError struct{ err error }

// Error returns the wrapped error's message unchanged.
func (e *terminalError) Error() string { return e.err.Error() }

// Unwrap exposes the cause to errors.Is and errors.As (NotFound, Invalid).
func (e *terminalError) Unwrap() error { return e.err }

// terminal wraps err as terminal; nil stays nil.
func terminal(err error) error {
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

// isRejected reports whether the API server refused a write for its content,
// which no retry of the same content can fix.
func isRejected(err error) bool {
	return apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) ||
		apierrors.IsRequestEntityTooLargeError(err) || apierrors.IsMethodNotSupported(err)
}
