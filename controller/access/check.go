// Package access is a reload's RBAC check: what stencil's own account
// needs for a new config beyond what it needed for the running one
// (Needs), and the SelfSubjectAccessReviews that ask the API server for it
// (Check) before anything of the new config is prepared.
//
// The choice a newcomer may question: the needs are not a list of their
// own but package install's Grants, the very rules "stencil rbac" prints,
// compared verb by verb with the running config's. A permission "stencil
// rbac" gains is asked the day it is added, and the check never asks for
// what the printed role does not grant. Asking first matters because the
// informers' first list would find a missing list or watch, but not a
// missing create, patch or delete: those would show only after the
// commit, as an apply failing on every resource.
package access

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	typedauthorizationv1 "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"k8s.io/klog/v2"
)

// Before a reload starts anything of a new config, it asks the API server
// whether stencil may do what the config needs beyond the running one:
// one SelfSubjectAccessReview per verb, as "kubectl auth can-i" does.

// Need is what stencil needs of one resource in one namespace.
type Need struct {
	// GVR and Subresource are the resource (its version unused, as in a
	// role) and the subresource, if any.
	GVR         schema.GroupVersionResource
	Subresource string
	Namespace   string // "" for all namespaces
	// Name is the one object needed (a fixed read, a generated CRD); ""
	// is every object.
	Name  string
	Verbs []string
}

// ResourceName names the resource as a role does: plural.group, and
// /subresource.
func (n Need) ResourceName() string {
	s := n.GVR.GroupResource().String()
	if n.Subresource != "" {
		s += "/" + n.Subresource
	}
	return s
}

// Sort orders needs by resource, then namespace, then name, so that
// the reviews and the messages are the same on every replica.
func Sort(needs []Need) {
	slices.SortFunc(needs, func(a, b Need) int {
		if c := strings.Compare(a.ResourceName(), b.ResourceName()); c != 0 {
			return c
		}
		if c := strings.Compare(a.Namespace, b.Namespace); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
}

// DeniedError says stencil lacks RBAC for what a new config needs. The
// reload is refused, and retrying it cannot help until the verbs are granted.
type DeniedError struct {
	// Resource is the resource as a role names it: "configmaps",
	// "deployments.apps", "webapps.apps.example.com/status".
	Resource string
	// Namespace is where the verbs were refused; "" means all namespaces.
	Namespace string
	// Name is the one object they were refused on; "" means every object.
	Name string
	// Verbs are the refused verbs, in the order a role lists them.
	Verbs []string
}

// Error names the verbs, the resource and the namespace.
func (e *DeniedError) Error() string {
	where := "in all namespaces"
	if e.Namespace != "" {
		where = "in namespace " + e.Namespace
	}
	what := e.Resource
	if e.Name != "" {
		what += " named " + e.Name
	}
	return fmt.Sprintf("reload refused: stencil may not %s %s %s (RBAC)", strings.Join(e.Verbs, ", "), what, where)
}

// Retryable says the same config may be taken later without a change to
// it: once the RBAC it lacks is granted. The reload loop tries it again.
func (e *DeniedError) Retryable() bool { return true }

// Check asks reviews, one review per verb, whether stencil may do
// everything needs lists, bounded by timeout. Each resource and namespace
// with refused verbs is a *DeniedError, joined with the others. A
// review that fails refuses the reload too: not known to be allowed is
// not allowed.
func Check(ctx context.Context, reviews typedauthorizationv1.SelfSubjectAccessReviewInterface, timeout time.Duration, needs []Need) error {
	if len(needs) == 0 {
		return nil
	}
	logger := klog.FromContext(ctx)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var denied []error
	for _, n := range needs {
		var refused, reasons []string
		for _, verb := range n.Verbs {
			review, err := reviews.Create(ctx, &authorizationv1.SelfSubjectAccessReview{
				Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
					Namespace: n.Namespace, Verb: verb, Group: n.GVR.Group, Resource: n.GVR.Resource, Subresource: n.Subresource, Name: n.Name,
				}},
			}, metav1.CreateOptions{})
			if err != nil {
				return fmt.Errorf("reload refused: asking whether stencil may %s %s: %w", verb, n.ResourceName(), err)
			}
			if !review.Status.Allowed {
				refused = append(refused, verb)
				if r := review.Status.Reason; r != "" && !slices.Contains(reasons, r) {
					reasons = append(reasons, r)
				}
			}
		}
		if len(refused) == 0 {
			continue
		}
		e := &DeniedError{Resource: n.ResourceName(), Namespace: n.Namespace, Name: n.Name, Verbs: refused}
		logger.Info("Reload refused: stencil lacks RBAC for what the new config adds",
			"resource", e.Resource, "namespace", e.Namespace, "name", e.Name, "verbs", e.Verbs, "reasons", reasons)
		denied = append(denied, e)
	}
	return errors.Join(denied...)
}
