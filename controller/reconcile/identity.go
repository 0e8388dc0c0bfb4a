package reconcile

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"stencil.dev/stencil/controller/reconcile/status"
	"stencil.dev/stencil/controller/requeue"
)

// Writing as the entry's identity (config.Identity, shared/DESIGN.md
// "Writing as the tenant"). A pass resolves the identity once, for its
// resource's namespace (writeAs): every create, apply, dry run and prune
// of the pass goes through the one ChildWriter that impersonates it, and
// the status patch and events through stencil's own Writer. The API
// server then checks each child write against the identity's RBAC; a
// refusal is the resource's failure (Forbidden), never a write as stencil
// instead.

// serviceAccounts is the resource of an identity's account.
var serviceAccounts = schema.GroupVersionResource{Version: "v1", Resource: "serviceaccounts"}

// accountTTL is how long an identity's ServiceAccount, once read, is taken
// to exist without being read again: a converged resync of many resources
// of one tenant costs one GET per account and TTL, not one per resource.
// An account deleted meanwhile is reported IdentityNotFound at the first
// sync after the TTL; until then its writes are checked against whatever
// RBAC still names its user.
const accountTTL = 30 * time.Second

// accounts remembers the ServiceAccounts found to exist, by user, for
// accountTTL. An account found missing is not remembered: it is read again
// at the next sync.
type accounts struct {
	mu   sync.Mutex
	seen map[string]time.Time
}

// fresh reports whether user's account was read within accountTTL.
func (a *accounts) fresh(user string, now time.Time) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	t, ok := a.seen[user]
	return ok && now.Sub(t) < accountTTL
}

// saw records that user's account exists, dropping what expired once the
// memo grows (bounded by the accounts read within a TTL).
func (a *accounts) saw(user string, now time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.seen == nil {
		a.seen = map[string]time.Time{}
	}
	if len(a.seen) >= 1024 {
		for u, t := range a.seen {
			if now.Sub(t) >= accountTTL {
				delete(a.seen, u)
			}
		}
	}
	a.seen[user] = now
}

// identityError is an identity whose ServiceAccount does not exist.
type identityError struct {
	identity, namespace, name string
}

// Error implements error.
func (e *identityError) Error() string {
	return fmt.Sprintf("identity %s: ServiceAccount %s/%s does not exist; nothing is written until it does (stencil never writes as itself instead)",
		e.identity, e.namespace, e.name)
}

// writeAs gives the pass the ChildWriter of its entry's identity in the
// resource's namespace, after making sure (with stencil's own client) that
// the identity's ServiceAccount exists; without an identity, stencil's own.
func (c *Reconciler) writeAs(ctx context.Context, p *pass) error {
	id := p.entry.Res.Identity
	if id == nil {
		w, err := c.writer.As("")
		p.children = w
		return err
	}
	ns, name := id.Account(p.parent.GetNamespace())
	p.as = id.User(p.parent.GetNamespace())
	if now := time.Now(); !c.accounts.fresh(p.as, now) {
		_, err := c.opts.Dynamic.Resource(serviceAccounts).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			return &identityError{identity: id.String(), namespace: ns, name: name}
		case err != nil:
			return fmt.Errorf("identity %s: reading ServiceAccount %s/%s: %w", id, ns, name, err)
		}
		c.accounts.saw(p.as, now)
	}
	w, err := c.writer.As(p.as)
	p.children = w
	return err
}

// identityFailed reports an identity that cannot be written as: its
// account is missing (IdentityNotFound), or it could not be checked. The
// resource is looked at again after IdentityRecheck, besides the backoff.
func (c *Reconciler) identityFailed(ctx context.Context, p *pass, err error) error {
	reason := status.ReasonApplyFailed
	if errors.As(err, new(*identityError)) {
		reason = status.ReasonIdentityNotFound
	}
	return requeue.After(c.fail(ctx, p, reason, err), c.opts.IdentityRecheck)
}

// forbiddenError is a write of a child that the identity may not make.
type forbiddenError struct {
	user, verb, kind, namespace, name string
	err                               error
}

// Error implements error: the identity, the verb, the kind and the
// namespace first, then what the API server said.
func (e *forbiddenError) Error() string {
	return fmt.Sprintf("%s may not %s %s in namespace %s (%s/%s): %v", e.user, e.verb, e.kind, e.namespace, e.kind, e.name, e.err)
}

// Unwrap returns the API server's error.
func (e *forbiddenError) Unwrap() error { return e.err }

// asIdentity wraps err, a write of verb on obj (kind, namespace, name) made
// as the pass's identity, as a forbiddenError when the API server refused
// the identity; anything else (a namespace that is terminating refuses
// with Forbidden too), and a write as stencil's own account, is returned
// as it is.
func (p *pass) asIdentity(err error, verb, kind, namespace, name string) error {
	if p.as == "" || !apierrors.IsForbidden(err) || apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
		return err
	}
	return &forbiddenError{user: p.as, verb: verb, kind: kind, namespace: namespace, name: name, err: err}
}

// isForbidden reports whether err holds a write the identity may not make.
func isForbidden(err error) bool {
	return errors.As(err, new(*forbiddenError))
}
