package reads

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	authzclient "k8s.io/client-go/kubernetes/typed/authorization/v1"
)

// A read whose object the tenant names (a computed objectName, a
// selector) of an entry with an identity is made only when the identity
// itself may get (or list) it: stencil's informers read everything its
// own role allows, and a tenant must not read through stencil what its
// account could not. A SubjectAccessReview asks the API server, and its
// answer is remembered for ReviewTTL: a revoked permission applies to the
// next render after that. Fixed reads (the platform's objects, by a name
// and namespace the config fixes) stay stencil's.

// ReviewTTL is how long an access review's answer is remembered: at most
// this long after a RoleBinding is removed, a render may still read what
// it allowed; at most this long after one is added, a read stays refused.
const ReviewTTL = 10 * time.Second

// Authorize reports whether user may verb the object name (all objects:
// "") of gvr in namespace.
type Authorize func(ctx context.Context, user, verb string, gvr schema.GroupVersionResource, namespace, name string) (bool, error)

// Reviews answers Authorize with SubjectAccessReviews, each answer
// remembered for ReviewTTL: a thousand resources of one tenant reading
// the same kind cost one review per object (or selector namespace) and
// TTL, not one per render. Renders that ask the same question while it
// is being asked wait for its answer instead of asking again, so that
// the workers rendering a tenant's resources at once (a start, a resync)
// send one review, not one each.
type Reviews struct {
	client authzclient.SubjectAccessReviewInterface
	now    func() time.Time

	mu      sync.Mutex
	answers map[reviewKey]reviewAnswer
	// asking holds the reviews in flight, by key.
	asking singleflight.Group
}

type reviewKey struct {
	user, verb string
	gvr        schema.GroupVersionResource
	namespace  string
	name       string
}

type reviewAnswer struct {
	allowed bool
	until   time.Time
}

// NewReviews returns Reviews that ask through client.
func NewReviews(client authzclient.SubjectAccessReviewInterface) *Reviews {
	return &Reviews{client: client, now: time.Now, answers: map[reviewKey]reviewAnswer{}}
}

// Allowed implements Authorize. A ServiceAccount's user is reviewed with
// the groups the API server gives it (system:serviceaccounts,
// system:serviceaccounts:NS, system:authenticated), so that RBAC bound to
// those groups counts as it does for the account's own requests.
func (r *Reviews) Allowed(ctx context.Context, user, verb string, gvr schema.GroupVersionResource, namespace, name string) (bool, error) {
	k := reviewKey{user: user, verb: verb, gvr: gvr, namespace: namespace, name: name}
	if allowed, ok := r.remembered(k); ok {
		return allowed, nil
	}
	// The first caller's context bounds the one request; should it end,
	// the others get its error and their resources are retried.
	allowed, err, _ := r.asking.Do(fmt.Sprintf("%q", []string{user, verb, gvr.String(), namespace, name}), func() (any, error) {
		if allowed, ok := r.remembered(k); ok {
			// Answered between this caller's look and its flight.
			return allowed, nil
		}
		return r.review(ctx, k)
	})
	if err != nil {
		return false, err
	}
	return allowed.(bool), nil
}

// remembered returns the answer to k while it is fresh.
func (r *Reviews) remembered(k reviewKey) (allowed, ok bool) {
	now := r.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	a, ok := r.answers[k]
	return a.allowed, ok && now.Before(a.until)
}

// review asks the API server k's question and remembers the answer.
func (r *Reviews) review(ctx context.Context, k reviewKey) (bool, error) {
	user, verb, gvr, namespace, name := k.user, k.verb, k.gvr, k.namespace, k.name
	now := r.now()
	groups := []string{"system:authenticated"}
	if rest, ok := strings.CutPrefix(user, "system:serviceaccount:"); ok {
		ns, _, _ := strings.Cut(rest, ":")
		groups = append(groups, "system:serviceaccounts", "system:serviceaccounts:"+ns)
	}
	review, err := r.client.Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: user, Groups: groups,
		ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: namespace, Verb: verb,
			Group: gvr.Group, Version: gvr.Version, Resource: gvr.Resource, Name: name},
	}}, metav1.CreateOptions{})
	if err != nil {
		return false, fmt.Errorf("reviewing whether %s may %s %s in namespace %s: %w", user, verb, gvr.GroupResource(), namespace, err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.answers) >= 4096 {
		for key, old := range r.answers {
			if !now.Before(old.until) {
				delete(r.answers, key)
			}
		}
	}
	r.answers[k] = reviewAnswer{allowed: review.Status.Allowed, until: now.Add(ReviewTTL)}
	return review.Status.Allowed, nil
}

// ForbiddenReadError is a read the identity may not make: nothing of the
// object is read.
type ForbiddenReadError struct {
	// User is the identity; Verb get (by name) or list (by selector).
	User, Verb string
	// Resource, Namespace and Name name what was to be read ("" name:
	// the objects a selector matches).
	Resource  schema.GroupResource
	Namespace string
	Name      string
}

// Error implements error.
func (e *ForbiddenReadError) Error() string {
	what := e.Resource.String()
	if e.Name != "" {
		what += " " + e.Name
	}
	return fmt.Sprintf("%s may not %s %s in namespace %s (a SubjectAccessReview): not read", e.User, e.Verb, what, e.Namespace)
}
