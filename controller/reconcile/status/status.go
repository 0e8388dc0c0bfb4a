// Package status computes what a custom resource's status says after a
// sync: phase, replicas, the Ready condition and the kstatus conditions
// (Reconciling, Stalled), Throttled, observedGeneration and the template
// revision, from its children's readiness (kstatus) and what the sync saw.
// It writes nothing; the reconciler patches what it computes.
//
// The choice a newcomer may question: stencil computes status from the
// children's own status by kstatus's rules, never by probing the
// workloads, and keeps every field others (the status template, other
// writers) set beside its own: what it computes is merged into a copy of
// the current status, never written as a whole.
package status

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"stencil.dev/stencil/contract"
	"stencil.dev/stencil/controller/reconcile/drift"
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

// Reasons of the Ready condition (and of the Warning events that repeat a
// failure), and of Throttled.
const (
	ReasonAllChildrenReady = "AllChildrenReady"
	ReasonProgressing      = "Progressing"
	ReasonRenderFailed     = "RenderFailed"
	// ReasonRenderKilled: the render killed its worker (a bound the
	// kernel or the deadline enforces, a fatal error); the message names
	// the template and the bound.
	ReasonRenderKilled = "RenderKilled"
	// ReasonRenderUnavailable: no render worker could be started (the
	// machine is out of processes or memory): not the resource's
	// failure; retried with backoff, never Stalled.
	ReasonRenderUnavailable = "RenderUnavailable"
	// ReasonRenderWorkerLost: the resource's renders lost their worker
	// from outside (a signal stencil did not send, such as the node's
	// OOM killer's) several times in a row; retried, never Stalled.
	ReasonRenderWorkerLost  = "RenderWorkerLost"
	ReasonApplyFailed       = "ApplyFailed"
	ReasonOwnershipConflict = "OwnershipConflict"
	ReasonPaused            = "Paused"
	ReasonChildFailed       = "ChildFailed"
	ReasonFieldFight        = "FieldFight"
	// ReasonWaitingForDependency: a template waits for a child of another
	// (dependsOn) or one it reads (observed) that is not there or ready.
	ReasonWaitingForDependency = "WaitingForDependency"
	// ReasonWaitingForRead: a required read (an entry's reads) does not
	// exist; nothing is written or pruned until it does.
	ReasonWaitingForRead = "WaitingForRead"
	// ReasonReadFailed: an entry's reads could not be read (the watch of
	// the read kind has not listed: not served, or forbidden); retried.
	ReasonReadFailed = "ReadFailed"
	// ReasonForbidden: the entry's identity may not make a write of a
	// child (its RBAC); the message names the identity, verb, kind and
	// namespace. Nothing is pruned; retried, never Stalled: a RoleBinding
	// may come.
	ReasonForbidden = "Forbidden"
	// ReasonIdentityNotFound: the ServiceAccount the entry's identity
	// names does not exist; nothing is written (never as stencil
	// instead); retried.
	ReasonIdentityNotFound = "IdentityNotFound"
)

// Desired computes the status the resource should have after a sync
// with outcome out, starting from a copy of its current status so that fields
// stencil does not own are kept.
func Desired(parent *unstructured.Unstructured, out Outcome) map[string]any {
	status := TemplateStatus(parent, out.Extra)
	if out.KeepTemplateStatus {
		// The status template waits for a child: its fields stay as
		// they were.
		status = Current(parent)
	}
	gen := parent.GetGeneration()
	status["observedGeneration"] = gen
	if out.Revision != "" {
		status[contract.StatusTemplateRevision] = out.Revision
	}
	if out.ReadsDeclared {
		status[contract.StatusReads] = append([]any{}, out.Reads...)
	} else {
		delete(status, contract.StatusReads)
	}

	cond := readyCondition(status, out, gen)
	conds := Conditions(status)
	// A Deployed condition and no Ready: helm-operator's status, the
	// release stencil is taking over.
	takeover := meta.FindStatusCondition(conds, contract.ConditionReady) == nil
	meta.SetStatusCondition(&conds, cond)
	// A child that failed (a rollout past its progress deadline, a Job
	// out of retries) waits for a person, as a rejected child does:
	// Stalled, so that kstatus, Flux and Argo CD say Failed, not
	// InProgress. stencil still watches it, and Stalled goes when it
	// recovers.
	setProgress(&conds, cond, out.Stalled || cond.Reason == ReasonChildFailed)
	if out.Release != nil && out.FailReason == "" {
		setDeployed(&conds, out.Release, gen, takeover)
	}
	if out.Fighting != "" {
		meta.SetStatusCondition(&conds, metav1.Condition{
			Type: contract.ConditionThrottled, Status: metav1.ConditionTrue, Reason: ReasonFieldFight, ObservedGeneration: gen,
			Message: out.Fighting,
		})
	} else {
		meta.RemoveStatusCondition(&conds, contract.ConditionThrottled)
	}
	SetConditions(status, conds)
	return status
}

// readyCondition computes the Ready condition of an outcome, and sets the
// phase and replica counts in status on the way.
func readyCondition(status map[string]any, out Outcome, gen int64) metav1.Condition {
	cond := metav1.Condition{Type: contract.ConditionReady, ObservedGeneration: gen}
	if out.WaitingForRead != "" {
		// Nothing was rendered or written: pending, not failed.
		status["phase"] = PhasePending
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, ReasonWaitingForRead, out.WaitingForRead
	} else if out.FailReason != "" {
		status["phase"] = PhaseDegraded
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, out.FailReason, out.FailMessage
	} else {
		var replicas, ready int64
		total, readyChildren := 0, 0
		waiting, failed := "", ""
		for _, child := range out.Live {
			if child == nil {
				continue
			}
			total++
			r := ReadinessOf(child)
			replicas += r.Desired
			ready += r.Ready
			switch {
			case r.OK:
				readyChildren++
			case r.Failed && failed == "":
				failed = fmt.Sprintf("%s/%s: %s", child.GetKind(), child.GetName(), r.Why)
			case waiting == "":
				waiting = fmt.Sprintf("%s/%s: %s", child.GetKind(), child.GetName(), r.Why)
			}
		}
		status["replicas"], status["readyReplicas"] = replicas, ready
		switch {
		case failed != "":
			// kstatus says a child failed (a Job that failed, a rollout
			// past its progress deadline): the resource is Degraded and
			// Stalled, and stencil keeps watching, since the child may
			// still recover.
			status["phase"] = PhaseDegraded
			cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, ReasonChildFailed, failed
		case out.Waiting != "":
			// A template waits for a child of another: converging, not
			// failed, and the message names both (kro #1071).
			status["phase"] = PhaseProgressing
			if readyChildren == 0 {
				status["phase"] = PhasePending
			}
			cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, ReasonWaitingForDependency, out.Waiting
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

	return cond
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
	on, off := contract.ConditionReconciling, contract.ConditionStalled
	if stalled {
		on, off = contract.ConditionStalled, contract.ConditionReconciling
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
	status := Current(parent)
	// A field an earlier status template rendered, and this one does not, is
	// removed; stencil's status field set tells which fields it wrote.
	for k := range fieldsOf(parent) {
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
// (contract.ReservedStatusFields); the status template may add others
// next to them.
var standardStatusFields = func() map[string]bool {
	m := map[string]bool{}
	for _, f := range contract.ReservedStatusFields {
		m[f] = true
	}
	// A chart entry's release stays named while a sync fails.
	m[contract.StatusDeployedRelease] = true
	return m
}()

// fieldsOf lists the top-level status fields that stencil's own status
// writes hold, from the resource's managedFields.
func fieldsOf(parent *unstructured.Unstructured) map[string]bool {
	set := drift.FieldSet(drift.ManagedFields(parent), func(e metav1.ManagedFieldsEntry) bool {
		return e.Manager == contract.FieldManager && e.Subresource == "status"
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

// IsThrottled reports whether the resource already says Throttled=True: a
// fight episode is going on and its Warning event was recorded.
func IsThrottled(parent *unstructured.Unstructured) bool {
	return meta.IsStatusConditionTrue(Conditions(Current(parent)), contract.ConditionThrottled)
}

// AlreadyReported reports whether the resource's Ready condition already
// says False with this reason and message for its current generation, i.e.
// an earlier sync recorded this failure.
func AlreadyReported(parent *unstructured.Unstructured, reason, message string) bool {
	c := meta.FindStatusCondition(Conditions(Current(parent)), contract.ConditionReady)
	return c != nil && c.Status == metav1.ConditionFalse && c.Reason == reason &&
		c.Message == message && c.ObservedGeneration == parent.GetGeneration()
}

// Paused changes only the conditions: a paused resource's other status
// fields, observedGeneration included, stay as they were. Ready says Paused.
// Reconciling goes, since stencil converges nothing while paused; Stalled
// stays, since pausing fixes nothing. kstatus then says Failed for a paused
// resource that was stalled, and InProgress for any other: Ready is False
// (it reads Ready where neither condition is present) and, once the spec
// changes during the pause, observedGeneration is behind.
func Paused(parent *unstructured.Unstructured, message string) map[string]any {
	status := Current(parent)
	conds := Conditions(status)
	meta.SetStatusCondition(&conds, metav1.Condition{
		Type: contract.ConditionReady, Status: metav1.ConditionFalse, Reason: ReasonPaused, ObservedGeneration: parent.GetGeneration(),
		Message: message,
	})
	meta.RemoveStatusCondition(&conds, contract.ConditionReconciling)
	SetConditions(status, conds)
	return status
}

func Current(parent *unstructured.Unstructured) map[string]any {
	if s, ok := parent.Object["status"].(map[string]any); ok {
		return runtime.DeepCopyJSON(s)
	}
	return map[string]any{}
}

// Conditions decodes status.conditions; malformed entries are dropped, so
// that a hand-edited status cannot wedge the controller.
func Conditions(status map[string]any) []metav1.Condition {
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

func SetConditions(status map[string]any, conds []metav1.Condition) {
	list := make([]any, 0, len(conds))
	for i := range conds {
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&conds[i])
		if err == nil {
			list = append(list, m)
		}
	}
	status["conditions"] = list
}

// Outcome is what one sync observed, from which status is computed.
type Outcome struct {
	// Waiting, when set, says which templates wait for which children:
	// Ready is False with ReasonWaitingForDependency, Reconciling True.
	Waiting string
	// KeepTemplateStatus keeps the status template's fields as they are:
	// it read a child that does not exist yet.
	KeepTemplateStatus bool
	// FailReason and FailMessage, when set, make the Ready condition False
	// with that reason.
	FailReason, FailMessage string
	// Stalled says the failure waits for a person (condition Stalled): a
	// terminal error, or a foreign object holding a child's name. Otherwise
	// it is retried (condition Reconciling).
	Stalled bool
	// Live holds each rendered child as last seen (apply response or cache),
	// in render order; nil entries were not written (conflict, failure).
	Live []*unstructured.Unstructured
	// Fighting, during a fight episode, says which field of which child
	// keeps being reverted and by whom.
	Fighting string
	// Extra is what the status template rendered.
	Extra map[string]any
	// Revision, when set, is the template revision the status names
	// (reconcile/rolloutgate.go).
	Revision string
	// Release, for a chart entry that converged, sets helm-operator's
	// Deployed condition.
	Release *Release
	// WaitingForRead, when set, names the required reads that do not
	// exist: Ready is False with ReasonWaitingForRead, Reconciling True.
	WaitingForRead string
	// Reads, with ReadsDeclared, is status.reads: what the render read.
	Reads         []any
	ReadsDeclared bool
}

// WaitingForReads is the message of a resource whose required reads
// (missing, "Kind namespace/name") do not exist.
func WaitingForReads(missing []string) string {
	return "waiting for " + strings.Join(missing, ", ") + ", which does not exist (a required read)"
}

// Release is what a chart entry's sync did, for the Deployed condition.
type Release struct {
	// Notes is the chart's rendered NOTES.txt, the condition's message.
	Notes string
	// Changed says the sync created, updated or pruned a child: an
	// upgrade, once the release was deployed.
	Changed bool
}

// Reasons of the Deployed condition, helm-operator's.
const (
	ReasonInstallSuccessful = "InstallSuccessful"
	ReasonUpgradeSuccessful = "UpgradeSuccessful"
	// ReasonTakeoverSuccessful is stencil's own: the release helm-operator
	// had deployed, served by stencil from its first sync on, its objects
	// kept in place (stencil's labels added), not upgraded.
	ReasonTakeoverSuccessful = "TakeoverSuccessful"
)

// maxMessage bounds a condition's message (the API's limit is 32768).
const maxMessage = 32768

// setDeployed sets helm-operator's Deployed condition for a chart entry
// whose children were all applied: InstallSuccessful the first time,
// UpgradeSuccessful once a later sync changed a child, and as it was
// otherwise, so that a converged resource's status does not change. The
// first sync of a release helm-operator deployed (takeover: its Deployed
// condition, no Ready of stencil's) is TakeoverSuccessful, whatever it
// changed: stamping stencil's labels on the objects is no upgrade.
func setDeployed(conds *[]metav1.Condition, rel *Release, gen int64, takeover bool) {
	reason := ReasonInstallSuccessful
	msg := "release was successfully installed"
	if prev := meta.FindStatusCondition(*conds, contract.ConditionDeployed); prev != nil && prev.Status == metav1.ConditionTrue {
		reason = prev.Reason
		switch {
		case takeover:
			reason = ReasonTakeoverSuccessful
		case rel.Changed:
			reason = ReasonUpgradeSuccessful
		}
		switch reason {
		case ReasonUpgradeSuccessful:
			msg = "release was successfully upgraded"
		case ReasonTakeoverSuccessful:
			msg = "release taken over from helm-operator: its objects kept in place"
		}
	}
	if rel.Notes != "" {
		msg = rel.Notes
	}
	if len(msg) > maxMessage {
		msg = msg[:maxMessage]
	}
	meta.SetStatusCondition(conds, metav1.Condition{Type: contract.ConditionDeployed, Status: metav1.ConditionTrue,
		Reason: reason, Message: msg, ObservedGeneration: gen})
}
