package reconcile

import (
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// isRejected reports whether the API server refused a write for its content,
// which no retry of the same content can fix.
func isRejected(err error) bool {
	return apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) ||
		apierrors.IsRequestEntityTooLargeError(err) || apierrors.IsMethodNotSupported(err) ||
		isTooLargeForEtcd(err)
}

// etcdTooLarge is the message of etcd's ErrRequestTooLarge, which the API
// server passes on as a 500 Internal Server Error without a reason of its
// own: an object within the API server's 3 MiB request limit but over
// etcd's 1.5 MiB value limit (a child rendered from a huge spec).
const etcdTooLarge = "etcdserver: request is too large"

// isTooLargeForEtcd reports whether etcd refused the object as too large:
// the same object is refused again, so retrying it is a loop (the fault
// suite's bad-input scenario found a 1.5 MiB spec retried 15 times, then
// again at every resync).
func isTooLargeForEtcd(err error) bool {
	return apierrors.IsInternalError(err) && strings.Contains(err.Error(), etcdTooLarge)
}
