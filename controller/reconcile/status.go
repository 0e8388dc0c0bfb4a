package reconcile

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"stencil.dev/stencil/controller/reconcile/drift"
	"stencil.dev/stencil/controller/registry"
	"stencil.dev/stencil/controller/requeue"
	"stencil.dev/stencil/templates"
)

// Status phases. The phase is deprecated in favour of the conditions (the API
// conventions deprecate phases: a new phase value breaks every client that
// switches on the old ones, a new condition breaks none). stencil keeps
// writing it, computed as it always was, for the clients that read it.
const (
	PhasePending     = "Pending"
	PhaseProgressing = "Progressing"
	PhaseReady       = "Ready"
	PhaseDegraded    = "Degraded"
)

// Condition types stencil writes.
const (
	// ConditionReady is True when every child is ready.
	ConditionReady = "Ready"
	// ConditionReconciling is True while stencil is converging the resource:
	// children not ready yet, or a failure that is being retried. Present
	// only while True, with the Ready condition's reason and message.
	ConditionReconciling = "Reconciling"
	// ConditionStalled is True while stencil cannot make progress without a
	// change by a person: a failed render, a child the API server rejects as
	// invalid, a foreign object holding a child's name. Present only while
	// True, with the Ready condition's reason and message.
	ConditionStalled = "Stalled"
	// ConditionThrottled is True while drift corrections are rate-limited
	// because another actor keeps reverting fields stencil sets.
	ConditionThrottled = "Throttled"
)

// desiredStatus computes the status the resource should have after a sync
// with outcome out, starting from a copy of its current status so that fields
// stencil does not own are kept.
func (c *Reconciler) desiredStatus(parent *unstructured.Unstructured, out outcome) map[string]any {
	status := TemplateStatus(parent, out.extra)
	gen := parent.GetGeneration()
	status["observedGeneration"] = gen
	if out.revision != "" {
		status[templates.StatusTemplateRevision] = out.revision
	}

	cond := metav1.Condition{Type: ConditionReady, ObservedGeneration: gen}
	if out.failReason != "" {
		status["phase"] = PhaseDegraded
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, out.failReason, out.failMessage
	} else {
		var replicas, ready int64
		total, readyChildren := 0, 0
		waiting, failed := "", ""
		for _, child := range out.live {
			if child == nil {
				continue
			}
			total++
			r := readiness(child)
			replicas += r.desired
			ready += r.ready
			switch {
			case r.ok:
				readyChildren++
			case r.failed && failed == "":
				failed = fmt.Sprintf("%s/%s: %s", child.GetKind(), child.GetName(), r.why)
			case waiting == "":
				waiting = fmt.Sprintf("%s/%s: %s", child.GetKind(), child.GetName(), r.why)
			}
		}
		status["replicas"], status["readyReplicas"] = replicas, ready
		switch {
		case failed != "":
			// kstatus says a child failed (a Job that failed, a rollout
			// past its progress deadline): the resource is Degraded, and
			// stencil keeps watching, since the child may still recover.
			status["phase"] = PhaseDegraded
			cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, ReasonChildFailed, failed
		case readyChildren == total:
			status["phase"] = PhaseReady
			cond.Status, cond.Reason = metav1.ConditionTrue, ReasonAllChildrenReady
			cond.Message = "all children ready"
		default:
			status["phase"] = PhaseProgressing
			if readyChildren == 0 {
				status["phase"] = PhasePending
			}
			cond.Status, cond.Reason = metav1.ConditionFalse, ReasonProgressing
			cond.Message = fmt.Sprintf("%d of %d children ready; waiting for %s", readyChildren, total, waiting)
		}
	}

	conds := conditionsOf(status)
	meta.SetStatusCondition(&conds, cond)
	setProgress(&conds, cond, out.stalled)
	if out.fighting != "" {
		meta.SetStatusCondition(&conds, metav1.Condition{
			Type: ConditionThrottled, Status: metav1.ConditionTrue, Reason: reasonFighting, ObservedGeneration: gen,
			Message: fmt.Sprintf("%s; corrections are limited to one per %s", out.fighting, c.opts.FightInterval),
		})
	} else {
		meta.RemoveStatusCondition(&conds, ConditionThrottled)
	}
	setConditions(status, conds)
	return status
}

// setProgress sets the kstatus conditions from the Ready condition ready:
// neither when Ready is True, Stalled when the failure waits for a person,
// Reconciling otherwise; never both. Each is present only while True (kstatus
// calls them abnormal-true), and repeats Ready's reason and message, so that
// kstatus, Argo CD and kubectl wait all show the same words.
//
// The condition that stays is updated in place, never removed and added
// again: its lastTransitionTime, and so the status, changes only when it
// turns True.
func setProgress(conds *[]metav1.Condition, ready metav1.Condition, stalled bool) {
	on, off := ConditionReconciling, ConditionStalled
	if stalled {
		on, off = ConditionStalled, ConditionReconciling
	}
	meta.RemoveStatusCondition(conds, off)
	if ready.Status == metav1.ConditionTrue {
		meta.RemoveStatusCondition(conds, on)
		return
	}
	meta.SetStatusCondition(conds, metav1.Condition{
		Type: on, Status: metav1.ConditionTrue, Reason: ready.Reason, Message: ready.Message,
		ObservedGeneration: ready.ObservedGeneration,
	})
}

// TemplateStatus returns a copy of the resource's status with the fields
// the status template rendered (extra) merged in, as the next sync writes
// them, before the fields stencil computes itself. "stencil diff" compares
// it with the live status.
func TemplateStatus(parent *unstructured.Unstructured, extra map[string]any) map[string]any {
	status := currentStatus(parent)
	// A field an earlier status template rendered, and this one does not, is
	// removed; stencil's status field set tells which fields it wrote.
	for k := range statusFieldsOf(parent) {
		if _, rendered := extra[k]; !rendered && !standardStatusFields[k] {
			delete(status, k)
		}
	}
	for k, v := range extra {
		if v == nil {
			// A value rendered as null asks for no field at all.
			delete(status, k)
			continue
		}
		status[k] = runtime.DeepCopyJSONValue(v)
	}
	return status
}

// standardStatusFields are the status fields stencil computes itself
// (templates.ReservedStatusFields); the status template may add others
// next to them.
var standardStatusFields = func() map[string]bool {
	m := map[string]bool{}
	for _, f := range templates.ReservedStatusFields {
		m[f] = true
	}
	return m
}()

// statusFieldsOf lists the top-level status fields that stencil's own status
// writes hold, from the resource's managedFields.
func statusFieldsOf(parent *unstructured.Unstructured) map[string]bool {
	set := drift.FieldSet(drift.ManagedFields(parent), func(e metav1.ManagedFieldsEntry) bool {
		return e.Manager == FieldManager && e.Subresource == "status"
	})
	out := map[string]bool{}
	if st, ok := set["f:status"].(map[string]any); ok {
		for k := range st {
			if strings.HasPrefix(k, "f:") {
				out[k[2:]] = true
			}
		}
	}
	return out
}

// isThrottled reports whether the resource already says Throttled=True: a
// fight episode is going on and its Warning event was recorded.
func isThrottled(parent *unstructured.Unstructured) bool {
	return meta.IsStatusConditionTrue(conditionsOf(currentStatus(parent)), ConditionThrottled)
}

// alreadyReported reports whether the resource's Ready condition already
// says False with this reason and message for its current generation, i.e.
// an earlier sync recorded this failure.
func alreadyReported(parent *unstructured.Unstructured, reason, message string) bool {
	c := meta.FindStatusCondition(conditionsOf(currentStatus(parent)), ConditionReady)
	return c != nil && c.Status == metav1.ConditionFalse && c.Reason == reason &&
		c.Message == message && c.ObservedGeneration == parent.GetGeneration()
}

// pausedStatus changes only the conditions: a paused resource's other status
// fields, observedGeneration included, stay as they were. Ready says Paused.
// Reconciling goes, since stencil converges nothing while paused; Stalled
// stays, since pausing fixes nothing. kstatus then says Failed for a paused
// resource that was stalled, and InProgress for any other: Ready is False
// (it reads Ready where neither condition is present) and, once the spec
// changes during the pause, observedGeneration is behind.
func pausedStatus(parent *unstructured.Unstructured) map[string]any {
	status := currentStatus(parent)
	conds := conditionsOf(status)
	meta.SetStatusCondition(&conds, metav1.Condition{
		Type: ConditionReady, Status: metav1.ConditionFalse, Reason: ReasonPaused, ObservedGeneration: parent.GetGeneration(),
		Message: AnnotationPaused + ` is "true": stencil makes no writes for this resource`,
	})
	meta.RemoveStatusCondition(&conds, ConditionReconciling)
	setConditions(status, conds)
	return status
}

func currentStatus(parent *unstructured.Unstructured) map[string]any {
	if s, ok := parent.Object["status"].(map[string]any); ok {
		return runtime.DeepCopyJSON(s)
	}
	return map[string]any{}
}

// conditionsOf decodes status.conditions; malformed entries are dropped, so
// that a hand-edited status cannot wedge the controller.
func conditionsOf(status map[string]any) []metav1.Condition {
	raw, ok := status["conditions"].([]any)
	if !ok {
		return nil
	}
	var out []metav1.Condition
	for _, r := range raw {
		m, ok := r.(map[string]any)
		if !ok {
			continue
		}
		var c metav1.Condition
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, &c); err == nil && c.Type != "" {
			out = append(out, c)
		}
	}
	return out
}

func setConditions(status map[string]any, conds []metav1.Condition) {
	list := make([]any, 0, len(conds))
	for i := range conds {
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&conds[i])
		if err == nil {
			list = append(list, m)
		}
	}
	status["conditions"] = list
}

// patchStatus merge-patches the status subresource with the difference
// between the cached status and status, only when they differ: an unchanged
// status costs no request, and so wakes no watch and starts no loop. Where
// the server stores less than was sent (a field the CRD's schema prunes),
// the cached status never equals the desired one; statusMemo remembers what
// the server made of the last patch, so the same request is not sent again.
func (c *Reconciler) patchStatus(ctx context.Context, pk *registry.Parent, parent *unstructured.Unstructured, status map[string]any) error {
	if s, ok := c.reg.StatusSchema(pk); ok {
		status, _ = registry.PruneBySchema(status, s).(map[string]any)
	}
	current := currentStatus(parent)
	if sameJSON(current, status) {
		return nil
	}
	key := Key{GVR: pk.Res.GVR(), NamespacedName: types.NamespacedName{Namespace: parent.GetNamespace(), Name: parent.GetName()}}
	wantJSON, curJSON := jsonOf(status), jsonOf(current)
	if c.statusMemo.matches(key, wantJSON, curJSON) {
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
	result, err := c.opts.Dynamic.Resource(pk.Res.GVR()).Namespace(parent.GetNamespace()).
		Patch(ctx, parent.GetName(), types.MergePatchType, patch, metav1.PatchOptions{FieldManager: FieldManager}, "status")
	if err != nil {
		err = fmt.Errorf("patching status: %w", err)
		if isRejected(err) {
			// The same patch would be rejected again: report it once and
			// wait for the resource or the template to change.
			c.warnOnce(parent, reasonStatusRejected, err.Error())
			return requeue.Terminal(err)
		}
		return err
	}
	c.statusMemo.set(key, wantJSON, jsonOf(currentStatus(result)))
	c.expect.wrote(result)
	c.opts.Metrics.statusPatches.WithLabelValues(pk.Label).Inc()
	klog.FromContext(ctx).V(2).Info("Patched status", "phase", status["phase"])
	return nil
}

func jsonOf(v any) string {
	data, _ := json.Marshal(v)
	return string(data)
}

// statusMemo remembers, per resource, the last status sent and the status
// the server stored in answer (resources.go).
type statusMemo struct {
	states *resourceStates
}

func (m statusMemo) matches(key Key, want, current string) bool {
	var ok bool
	m.states.view(key, func(st *resourceState) {
		ok = st != nil && st.sent && st.status == [2]string{want, current}
	})
	return ok
}

func (m statusMemo) set(key Key, want, stored string) {
	m.states.update(key, func(st *resourceState) { st.status, st.sent = [2]string{want, stored}, true })
}

// sameJSON compares two JSON values by their encoding, so that int64 and
// float64 holding the same number compare equal (decoders pick either).
func sameJSON(a, b any) bool {
	ja, errA := json.Marshal(a)
	jb, errB := json.Marshal(b)
	return errA == nil && errB == nil && bytes.Equal(ja, jb)
}
