package reconcile

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/klog/v2"

	"stencil.dev/stencil/controller/reads"
	"stencil.dev/stencil/controller/reconcile/status"
	"stencil.dev/stencil/controller/requeue"
	"stencil.dev/stencil/templates"
	"stencil.dev/stencil/templates/view"
)

// Reads (DESIGN.md, "reads"): before a resource of an entry with reads
// renders, its reads are resolved from the watcher's caches and indexed
// under it, so that a change to what it read queues it again; a required
// read that does not exist holds it, with nothing written or pruned.

// ReadWatcher is what a sync resolves an entry's reads through, and tells
// who read what: reads.Watcher in "stencil run" and "stencil diff", a fixed
// set of objects in "stencil test" (package offline). An interface so that
// a test case runs this package's Sync, not a copy of its decisions.
type ReadWatcher interface {
	// SourceAs is the source of what a render reads, as user (an entry's
	// identity; "" for stencil's own account).
	SourceAs(ctx context.Context, user string) templates.ReadSource
	// Track records what reader looked for, so that a change to it queues
	// the reader again.
	Track(reader reads.Reader, targets []templates.ReadTarget)
	// Forget drops a reader that no longer exists; Retain keeps only the
	// readers keep accepts.
	Forget(reader reads.Reader)
	Retain(keep func(reads.Reader) bool)
	// Hold keeps only the readers of the namespaces holds accepts.
	Hold(holds func(ns string) bool)
	// Cached calls fn with each object the read caches hold.
	Cached(fn func(u *unstructured.Unstructured, secretData bool))
}

// render resolves p's reads for obj (the render's view, which carries
// them), indexes what they looked for under p's resource, and renders
// obj with live, unless a required read found nothing (a nil Result):
// templates.Set.RenderReading, which "stencil render" and "stencil test"
// run too. A failure to read is a *templates.ReadError (readFailed).
func (c *Reconciler) render(ctx context.Context, p *pass, obj *view.Object, live templates.Live) (*templates.Result, error) {
	var src templates.ReadSource
	if p.entry.Set.HasReads() {
		if c.opts.Reads == nil {
			return nil, &templates.ReadError{Err: errors.New("no read watcher")}
		}
		src = c.opts.Reads.SourceAs(ctx, p.as)
	}
	r, found, err := p.entry.Set.RenderReading(obj, src, live, func(found *templates.Reads) {
		// Indexed before anything renders: the object a required read
		// waits for wakes the resource when it is created.
		c.opts.Reads.Track(reads.Reader(p.key), found.Targets)
	})
	p.reads = found
	if r != nil || (err != nil && !errors.As(err, new(*templates.ReadError))) {
		c.opts.Metrics.renders.WithLabelValues(p.entry.Label).Inc()
	}
	return r, err
}

// readFailed reports a failure to resolve p's reads (a watch that has not
// listed: the kind is not served, or stencil may not list it): transient,
// reported (ReadFailed), retried with backoff, nothing else written.
func (c *Reconciler) readFailed(ctx context.Context, p *pass, err *templates.ReadError) error {
	if errors.As(err.Err, new(*reads.ForbiddenReadError)) {
		// The identity may not read what the tenant named: nothing of it
		// was read; looked at again once the review's answer expires.
		return requeue.After(c.fail(ctx, p, status.ReasonForbidden, fmt.Errorf("reading what %s reads: %w", p.key, err.Err)), reads.ReviewTTL)
	}
	return c.fail(ctx, p, status.ReasonReadFailed, fmt.Errorf("reading what %s reads: %w", p.key, err.Err))
}

// waitForReads reports that p waits for its required reads: Ready False,
// WaitingForRead naming them, and a Warning event once.
func (c *Reconciler) waitForReads(ctx context.Context, p *pass) error {
	msg := status.WaitingForReads(p.reads.Missing)
	klog.FromContext(ctx).V(2).Info("Waiting for required reads", "missing", p.reads.Missing)
	c.warnOnce(p.parent, status.ReasonWaitingForRead, msg)
	return c.setStatus(ctx, p, status.Outcome{WaitingForRead: msg, KeepTemplateStatus: true}, 0)
}

// HoldReads makes the read watcher keep only the readers of the
// namespaces holds accepts (a ring member's share): the watches of the
// others' namespaces stop once they have no reader here.
func (c *Reconciler) HoldReads(holds func(ns string) bool) {
	if c.opts.Reads != nil {
		c.opts.Reads.Hold(holds)
	}
}

// ReadCache calls fn with each object the read caches hold, and whether
// its scope keeps a Secret's data (reads.Watcher.Cached).
func (c *Reconciler) ReadCache(fn func(u *unstructured.Unstructured, secretData bool)) {
	if c.opts.Reads != nil {
		c.opts.Reads.Cached(fn)
	}
}
