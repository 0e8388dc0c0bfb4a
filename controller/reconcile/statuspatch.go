package reconcile

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"

	"k8s.io/klog/v2"

	"stencil.dev/stencil/contract"
	"stencil.dev/stencil/controller/reconcile/expect"
	"stencil.dev/stencil/controller/reconcile/status"
	"stencil.dev/stencil/controller/registry"
	"stencil.dev/stencil/controller/requeue"
)

// patchStatus merge-patches the status subresource with the difference
// between the cached status and status, only when they differ: an unchanged
// status costs no request, and so wakes no watch and starts no loop. Where
// the server stores less than was sent (a field the CRD's schema prunes),
// the cached status never equals the desired one; memory.Status remembers what
// the server made of the last patch, so the same request is not sent again.
func (c *Reconciler) patchStatus(ctx context.Context, p *pass, want map[string]any) error {
	entry, parent := p.entry, p.parent
	if s, ok := c.reg.StatusSchema(entry); ok {
		want, _ = registry.PruneBySchema(want, s).(map[string]any)
	}
	current := status.Current(parent)
	if sameJSON(current, want) {
		return nil
	}
	key := p.key
	wantJSON, curJSON := jsonOf(want), jsonOf(current)
	if c.memory.Status.Matches(key, wantJSON, curJSON) {
		return nil
	}
	diff, err := jsonpatch.CreateMergePatch([]byte(curJSON), []byte(wantJSON))
	if err != nil {
		return requeue.Terminal(fmt.Errorf("computing status patch: %w", err))
	}
	patch, err := json.Marshal(map[string]any{
		// The resourceVersion makes the patch fail with a conflict, rather
		// than overwrite, if the status changed since it was read.
		"metadata": map[string]any{"resourceVersion": parent.GetResourceVersion()},
		"status":   json.RawMessage(diff),
	})
	if err != nil {
		return requeue.Terminal(fmt.Errorf("encoding status: %w", err))
	}
	if err := c.mayWrite(parent.GetNamespace()); err != nil {
		return err
	}
	done := c.expect.Writing(expect.KeyOf(parent))
	result, err := c.writer.PatchStatus(ctx, entry.Res.GVR(), parent, patch)
	if err != nil {
		c.expected(key, done(nil, false))
		err = fmt.Errorf("patching status: %w", err)
		if isRejected(err) {
			// The same patch would be rejected again: report it once and
			// wait for the resource or the template to change.
			c.warnOnce(parent, reasonStatusRejected, err.Error())
			return requeue.Terminal(err)
		}
		return err
	}
	c.memory.Status.Set(key, wantJSON, jsonOf(status.Current(result)))
	// No render reads status.reads (view.NewObject leaves it out), and
	// this sync decided from the rest: the event of a patch of it alone
	// need not render the resource again. One read edit then costs each
	// reader one render.
	c.expected(key, done(result, onlyReads(diff)))
	c.opts.Metrics.statusPatches.WithLabelValues(entry.Label).Inc()
	klog.FromContext(ctx).V(2).Info("Patched status", "phase", want["phase"])
	return nil
}

// onlyReads reports whether a status merge patch changes status.reads
// and nothing else.
func onlyReads(diff []byte) bool {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(diff, &fields); err != nil || len(fields) != 1 {
		return false
	}
	_, ok := fields[contract.StatusReads]
	return ok
}

func jsonOf(v any) string {
	data, _ := json.Marshal(v)
	return string(data)
}

// sameJSON compares two JSON values by their encoding, so that int64 and
// float64 holding the same number compare equal (decoders pick either).
func sameJSON(a, b any) bool {
	ja, errA := json.Marshal(a)
	jb, errB := json.Marshal(b)
	return errA == nil && errB == nil && bytes.Equal(ja, jb)
}
