package controller

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/klog/v2"
)

// Before a reload starts anything of a new config, it asks the API server
// whether stencil may do what the config needs of every resource and
// child kind it adds: one SelfSubjectAccessReview per verb, as "kubectl
// auth can-i" does. The informers' first list would find a missing list
// or watch, but not a missing create, patch or delete: those would show
// only after the commit, as an apply failing on every resource.

// accessNeed is what stencil needs of one resource in one namespace.
type accessNeed struct {
	gvr         schema.GroupVersionResource
	subresource string
	namespace   string // "" for all namespaces
	verbs       []string
}

// resourceName names the resource as a role does: plural.group, and
// /subresource.
func (n accessNeed) resourceName() string {
	s := n.gvr.GroupResource().String()
	if n.subresource != "" {
		s += "/" + n.subresource
	}
	return s
}

// AccessDeniedError says stencil lacks RBAC for what a new config needs. The
// reload is refused, and retrying it cannot help until the verbs are granted.
type AccessDeniedError struct {
	// Resource is the resource as a role names it: "configmaps",
	// "deployments.apps", "webapps.apps.example.com/status".
	Resource string
	// Namespace is where the verbs were refused; "" means all namespaces.
	Namespace string
	// Verbs are the refused verbs, in the order a role lists them.
	Verbs []string
}

// Error names the verbs, the resource and the namespace.
func (e *AccessDeniedError) Error() string {
	where := "in all namespaces"
	if e.Namespace != "" {
		where = "in namespace " + e.Namespace
	}
	return fmt.Sprintf("reload refused: stencil may not %s %s %s (RBAC)", strings.Join(e.Verbs, ", "), e.Resource, where)
}

// Retryable says the same config may be taken later without a change to
// it: once the RBAC it lacks is granted. The reload loop tries it again.
func (e *AccessDeniedError) Retryable() bool { return true }

// reloadNeeds lists what a prepared config needs beyond the running one:
// the parents it starts watching (new entries, or entries whose watch
// changed), and the child kinds and namespaces it adds to have. Sorted, so
// that the reviews and the messages are the same on every replica.
func (c *Controller) reloadNeeds(p *preparedConfig, have map[schema.GroupVersionKind]*childKind) []accessNeed {
	var needs []accessNeed
	for g, pk := range p.next {
		if p.kept[g] {
			continue
		}
		for _, ns := range scopeNamespaces(c.opts.Namespace, pk.res.Namespaces) {
			needs = append(needs,
				accessNeed{gvr: g, namespace: ns, verbs: parentVerbs},
				accessNeed{gvr: g, subresource: "status", namespace: ns, verbs: statusVerbs})
		}
	}
	for k, ck := range p.children.kinds {
		for _, ns := range slices.Sorted(maps.Keys(ck.informers)) {
			if old := have[k]; old != nil && old.informers[ns] != nil {
				continue
			}
			needs = append(needs, accessNeed{gvr: ck.gvr, namespace: ns, verbs: childVerbs})
		}
	}
	slices.SortFunc(needs, func(a, b accessNeed) int {
		if c := strings.Compare(a.resourceName(), b.resourceName()); c != 0 {
			return c
		}
		return strings.Compare(a.namespace, b.namespace)
	})
	return needs
}

// checkAccess asks, one review per verb, whether stencil may do everything
// needs lists, bounded by CacheSyncTimeout. Each resource and namespace
// with refused verbs is an *AccessDeniedError, joined with the others. A
// review that fails refuses the reload too: not known to be allowed is
// not allowed. Without Options.Kube (unit tests) nothing is checked.
func (c *Controller) checkAccess(ctx context.Context, needs []accessNeed) error {
	if c.opts.Kube == nil || len(needs) == 0 {
		return nil
	}
	logger := klog.FromContext(ctx)
	ctx, cancel := context.WithTimeout(ctx, c.opts.CacheSyncTimeout)
	defer cancel()
	reviews := c.opts.Kube.AuthorizationV1().SelfSubjectAccessReviews()
	var denied []error
	for _, n := range needs {
		var refused, reasons []string
		for _, verb := range n.verbs {
			review, err := reviews.Create(ctx, &authorizationv1.SelfSubjectAccessReview{
				Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
					Namespace: n.namespace, Verb: verb, Group: n.gvr.Group, Resource: n.gvr.Resource, Subresource: n.subresource,
				}},
			}, metav1.CreateOptions{})
			if err != nil {
				return fmt.Errorf("reload refused: asking whether stencil may %s %s: %w", verb, n.resourceName(), err)
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
		e := &AccessDeniedError{Resource: n.resourceName(), Namespace: n.namespace, Verbs: refused}
		logger.Info("Reload refused: stencil lacks RBAC for what the new config adds",
			"resource", e.Resource, "namespace", e.Namespace, "verbs", e.Verbs, "reasons", reasons)
		denied = append(denied, e)
	}
	return errors.Join(denied...)
}
