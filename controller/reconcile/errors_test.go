package reconcile

import (
	"errors"
	"fmt"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestIsRejected(t *testing.T) {
	deployments := schema.GroupResource{Group: "apps", Resource: "deployments"}
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"invalid", apierrors.NewInvalid(deployments.WithVersion("v1").GroupVersion().WithKind("Deployment").GroupKind(), "x", nil), true},
		{"too large for the API server (413)", apierrors.NewRequestEntityTooLargeError("limit is 3145728"), true},
		// What the API server answers when etcd refuses the value: a 500
		// carrying etcd's message.
		{"too large for etcd (500)", apierrors.NewInternalError(errors.New("etcdserver: request is too large")), true},
		{"too large for etcd, wrapped", fmt.Errorf("applying Deployment/x: %w", apierrors.NewInternalError(errors.New("etcdserver: request is too large"))), true},
		{"another internal error", apierrors.NewInternalError(errors.New("etcdserver: leader changed")), false},
		{"unavailable", apierrors.NewServiceUnavailable("etcd is down"), false},
		{"conflict", apierrors.NewConflict(deployments, "x", errors.New("changed")), false},
	} {
		if got := isRejected(tc.err); got != tc.want {
			t.Errorf("%s: isRejected(%v) = %v, want %v", tc.name, tc.err, got, tc.want)
		}
	}
}
