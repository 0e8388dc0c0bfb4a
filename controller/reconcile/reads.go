package reconcile

import (
	"context"
	"fmt"

	"k8s.io/klog/v2"

	"stencil.dev/stencil/controller/reads"
	"stencil.dev/stencil/controller/reconcile/status"
	"stencil.dev/stencil/templates/view"
)

// Reads (DESIGN.md, "reads"): before a resource of an entry with reads
// renders, its reads are resolved from the watcher's caches and indexed
// under it, so that a change to what it read queues it again; a required
// read that does not exist holds it, with nothing written or pruned.

// resolveReads resolves p's reads for obj (the render's view, which
// carries them) and indexes what they looked for under p's resource. A
// failure (a watch that has not listed: the kind is not served, or
// stencil may not list it) is transient: reported (ReadFailed), retried
// with backoff, nothing else written.
func (c *Reconciler) resolveReads(ctx context.Context, p *pass, obj *view.Object) error {
	if c.opts.Reads == nil {
		return fmt.Errorf("resolving the reads of %s: no read watcher", p.key)
	}
	r, err := p.entry.Set.ResolveReads(obj, c.opts.Reads.Source(ctx))
	if err != nil {
		return c.fail(ctx, p, status.ReasonReadFailed, fmt.Errorf("reading what %s reads: %w", p.key, err))
	}
	// Indexed before anything else: the object a required read waits for
	// wakes the resource when it is created.
	c.opts.Reads.Track(reads.Reader(p.key), r.Targets)
	p.reads = r
	obj.Reads = r.Values
	return nil
}

// waitForReads reports that p waits for its required reads: Ready False,
// WaitingForRead naming them, and a Warning event once.
func (c *Reconciler) waitForReads(ctx context.Context, p *pass) error {
	msg := status.WaitingForReads(p.reads.Missing)
	klog.FromContext(ctx).V(2).Info("Waiting for required reads", "missing", p.reads.Missing)
	c.warnOnce(p.parent, status.ReasonWaitingForRead, msg)
	return c.setStatus(ctx, p, status.Outcome{WaitingForRead: msg, KeepTemplateStatus: true}, 0)
}
