package registry

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
// whether stencil may do what the config needs beyond the running one
// (package install's Grants, what "stencil rbac" prints; package
// controller lists them): one SelfSubjectAccessReview per verb, as
// "kubectl auth can-i" does. The informers' first list would find a
// missing list or watch, but not a missing create, patch or delete: those
// would show only after the commit, as an apply failing on every resource.

// AccessNeed is what stencil needs of one resource in one namespace.
type AccessNeed struct {
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
func (n AccessNeed) ResourceName() string {
	s := n.GVR.GroupResource().String()
	if n.Subresource != "" {
		s += "/" + n.Subresource
	}
	return s
}

// SortNeeds orders needs by resource, then namespace, then name, so that
// the reviews and the messages are the same on every replica.
func SortNeeds(needs []AccessNeed) {
	slices.SortFunc(needs, func(a, b AccessNeed) int {
		if c := strings.Compare(a.ResourceName(), b.ResourceName()); c != 0 {
			return c
		}
		if c := strings.Compare(a.Namespace, b.Namespace); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
}

// AccessDeniedError says stencil lacks RBAC for what a new config needs. The
// reload is refused, and retrying it cannot help until the verbs are granted.
type AccessDeniedError struct {
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
func (e *AccessDeniedError) Error() string {
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
func (e *AccessDeniedError) Retryable() bool { return true }

// CheckAccess asks reviews, one review per verb, whether stencil may do
// everything needs lists, bounded by timeout. Each resource and namespace
// with refused verbs is an *AccessDeniedError, joined with the others. A
// review that fails refuses the reload too: not known to be allowed is
// not allowed.
func CheckAccess(ctx context.Context, reviews typedauthorizationv1.SelfSubjectAccessReviewInterface, timeout time.Duration, needs []AccessNeed) error {
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
		e := &AccessDeniedError{Resource: n.ResourceName(), Namespace: n.Namespace, Name: n.Name, Verbs: refused}
		logger.Info("Reload refused: stencil lacks RBAC for what the new config adds",
			"resource", e.Resource, "namespace", e.Namespace, "name", e.Name, "verbs", e.Verbs, "reasons", reasons)
		denied = append(denied, e)
	}
	return errors.Join(denied...)
}
