package reconcile

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"stencil.dev/stencil/config"
	"stencil.dev/stencil/controller/reconcile/memory"
	"stencil.dev/stencil/controller/reconcile/status"
	"stencil.dev/stencil/controller/requeue"
)

// Writing as the entry's identity (config.Identity, shared/DESIGN.md
// "Writing as the tenant"). A pass resolves the identity once, for its
// resource's namespace (userOf, writeAs): every create, apply, dry run and
// prune of the pass goes through the one ChildWriter that impersonates it
// (identityWriter), and the status patch and events through stencil's own
// Writer. The API server then checks each child write against the
// identity's RBAC; a refusal is the resource's failure (Forbidden), never a
// write as stencil instead.

// serviceAccounts is the resource of an identity's account.
var serviceAccounts = schema.GroupVersionResource{Version: "v1", Resource: "serviceaccounts"}

// identityError is an identity whose ServiceAccount does not exist.
type identityError struct {
	identity, namespace, name string
}

// Error implements error.
func (e *identityError) Error() string {
	return fmt.Sprintf("identity %s: ServiceAccount %s/%s does not exist; nothing is written until it does (stencil never writes as itself instead)",
		e.identity, e.namespace, e.name)
}

// userOf is the user an entry of identity id writes as for a resource in
// namespace ns; "" (stencil's own) without one.
func userOf(id *config.Identity, ns string) string {
	if id == nil {
		return ""
	}
	return id.User(ns)
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
	if id.Tenant != "" && p.parent.GetNamespace() == "" {
		// Cluster-scoped: there is no tenant namespace to find the account in.
		return fmt.Errorf("identity %s: %s is cluster-scoped, so it has no namespace of a tenant's account; use {serviceAccount, namespace}", id, p.key.Name)
	}
	ns, name := id.Account(p.parent.GetNamespace())
	if now := time.Now(); !c.memory.Accounts.Fresh(p.as, now) {
		_, err := c.opts.Dynamic.Resource(serviceAccounts).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			return &identityError{identity: id.String(), namespace: ns, name: name}
		case err != nil:
			return fmt.Errorf("identity %s: reading ServiceAccount %s/%s: %w", id, ns, name, err)
		}
		c.memory.Accounts.Saw(p.as, now)
	}
	w, err := c.writer.As(p.as)
	if err != nil {
		return err
	}
	p.children = identityWriter{ChildWriter: w, user: p.as, refusals: &c.memory.IdentityRefusals, recheck: c.opts.IdentityRecheck}
	return nil
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
	// until is when the write is sent again (memory.IdentityRefusals).
	until time.Time
}

// Error implements error: the identity, the verb, the kind and the
// namespace first, then why, in the API server's words without the
// object's name (forbiddenDetail), so that every resource refused the
// same write reports the same text, whichever of them the API server
// answered (memory.IdentityRefusals).
func (e *forbiddenError) Error() string {
	return fmt.Sprintf("%s may not %s %s in namespace %s (%s/%s): %s", e.user, e.verb, e.kind, e.namespace, e.kind, e.name, forbiddenDetail(e.err))
}

// Unwrap returns the API server's error.
func (e *forbiddenError) Unwrap() error { return e.err }

// forbiddenDetail is the API server's reason for a Forbidden, after its
// `<resource> "<name>" is forbidden: ` prefix: RBAC's `User "..." cannot
// patch resource "services" ...`, or an admission plugin's reason (such as
// OwnerReferencesPermissionEnforcement's "cannot set blockOwnerDeletion").
func forbiddenDetail(err error) string {
	msg := err.Error()
	if _, after, ok := strings.Cut(msg, " is forbidden: "); ok {
		return after
	}
	return msg
}

// isForbidden reports whether err holds a write the identity may not make.
func isForbidden(err error) bool {
	return errors.As(err, new(*forbiddenError))
}

// identityWriter is the ChildWriter of a pass with an identity: the
// impersonating writer, whose Forbidden answers become forbiddenErrors
// naming the user, verb, kind and namespace, and are remembered
// (memory.IdentityRefusals) so that the same write is not sent again before the recheck.
type identityWriter struct {
	ChildWriter
	user     string
	refusals *memory.IdentityRefusals
	recheck  time.Duration
}

// Create implements ChildWriter.
func (w identityWriter) Create(ctx context.Context, parent *unstructured.Unstructured, gvr schema.GroupVersionResource, want *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	return w.write("create", gvr, want, func() (*unstructured.Unstructured, error) { return w.ChildWriter.Create(ctx, parent, gvr, want) })
}

// Apply implements ChildWriter.
func (w identityWriter) Apply(ctx context.Context, parent *unstructured.Unstructured, gvr schema.GroupVersionResource, want *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	return w.write("patch", gvr, want, func() (*unstructured.Unstructured, error) { return w.ChildWriter.Apply(ctx, parent, gvr, want) })
}

// Delete implements ChildWriter.
func (w identityWriter) Delete(ctx context.Context, parent *unstructured.Unstructured, gvr schema.GroupVersionResource, child *unstructured.Unstructured) error {
	_, err := w.write("delete", gvr, child, func() (*unstructured.Unstructured, error) {
		return nil, w.ChildWriter.Delete(ctx, parent, gvr, child)
	})
	return err
}

// write makes one write of verb on obj, unless the same write was refused
// within the recheck; a Forbidden answer (other than a terminating
// namespace's, which refuses with Forbidden too) is remembered and
// returned as a forbiddenError.
func (w identityWriter) write(verb string, gvr schema.GroupVersionResource, obj *unstructured.Unstructured, send func() (*unstructured.Unstructured, error)) (*unstructured.Unstructured, error) {
	k := memory.WriteKey{User: w.user, Verb: verb, Resource: gvr.GroupResource(), Namespace: obj.GetNamespace()}
	kind := obj.GetKind()
	if kind == "" {
		kind = gvr.Resource
	}
	refused := func(f memory.Refused) error {
		return &forbiddenError{user: w.user, verb: verb, kind: kind, namespace: obj.GetNamespace(), name: obj.GetName(), err: f.Err, until: f.Until}
	}
	now := time.Now()
	if f, ok := w.refusals.Get(k, now); ok {
		return nil, refused(f)
	}
	out, err := send()
	if !apierrors.IsForbidden(err) || apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
		return out, err
	}
	f := memory.Refused{Err: err, Until: now.Add(w.recheck)}
	w.refusals.Set(k, f)
	return nil, refused(f)
}

// recheckIn is how long until the earliest of the refused writes in err
// is sent again (at least a second): when the resource is looked at
// again, so that a RoleBinding made meanwhile is seen within one recheck,
// never a recheck plus a backoff. def when err holds none.
func recheckIn(err error, def time.Duration) time.Duration {
	var earliest time.Time
	var walk func(error)
	walk = func(err error) {
		switch e := err.(type) {
		case nil:
		case *forbiddenError:
			if earliest.IsZero() || e.until.Before(earliest) {
				earliest = e.until
			}
		case interface{ Unwrap() []error }:
			for _, inner := range e.Unwrap() {
				walk(inner)
			}
		case interface{ Unwrap() error }:
			walk(e.Unwrap())
		}
	}
	walk(err)
	if earliest.IsZero() {
		return def
	}
	return max(time.Until(earliest), time.Second)
}
