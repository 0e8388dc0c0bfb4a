package controller

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
)

// Status phases.
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
	// ConditionThrottled is True while drift corrections are rate-limited
	// because another actor keeps reverting fields stencil sets.
	ConditionThrottled = "Throttled"
)

// desiredStatus computes the status the resource should have after a sync
// with outcome out, starting from a copy of its current status so that fields
// stencil does not own are kept.
func (c *Controller) desiredStatus(parent *unstructured.Unstructured, out outcome) map[string]any {
	status := currentStatus(parent)
	for k, v := range out.extra {
		status[k] = runtime.DeepCopyJSONValue(v)
	}
	gen := parent.GetGeneration()
	status["observedGeneration"] = gen

	cond := metav1.Condition{Type: ConditionReady, ObservedGeneration: gen}
	if out.failReason != "" {
		status["phase"] = PhaseDegraded
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, out.failReason, out.failMessage
	} else {
		var replicas, ready int64
		total, readyChildren := 0, 0
		waiting := ""
		for _, child := range out.live {
			if child == nil {
				continue
			}
			total++
			r := readiness(child)
			replicas += r.desired
			ready += r.ready
			if r.ok {
				readyChildren++
			} else if waiting == "" {
				waiting = fmt.Sprintf("%s/%s: %s", child.GetKind(), child.GetName(), r.why)
			}
		}
		status["replicas"], status["readyReplicas"] = replicas, ready
		switch {
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
	if out.fighting != "" {
		meta.SetStatusCondition(&conds, metav1.Condition{
			Type: ConditionThrottled, Status: metav1.ConditionTrue, Reason: reasonFighting, ObservedGeneration: gen,
			Message: fmt.Sprintf("fields stencil sets on %s keep being reverted by another writer; corrections are limited to one per %s",
				out.fighting, c.opts.FightInterval),
		})
	} else {
		meta.RemoveStatusCondition(&conds, ConditionThrottled)
	}
	setConditions(status, conds)
	return status
}

// alreadyReported reports whether the resource's Ready condition already
// says False with this reason and message for its current generation, i.e.
// an earlier sync recorded this failure.
func alreadyReported(parent *unstructured.Unstructured, reason, message string) bool {
	c := meta.FindStatusCondition(conditionsOf(currentStatus(parent)), ConditionReady)
	return c != nil && c.Status == metav1.ConditionFalse && c.Reason == reason &&
		c.Message == message && c.ObservedGeneration == parent.GetGeneration()
}

// pausedStatus changes only the Ready condition: a paused resource's other
// status fields stay as they were.
func pausedStatus(parent *unstructured.Unstructured) map[string]any {
	status := currentStatus(parent)
	conds := conditionsOf(status)
	meta.SetStatusCondition(&conds, metav1.Condition{
		Type: ConditionReady, Status: metav1.ConditionFalse, Reason: ReasonPaused, ObservedGeneration: parent.GetGeneration(),
		Message: AnnotationPaused + ` is "true": stencil makes no writes for this resource`,
	})
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

// patchStatus merge-patches the status subresource, only when status differs
// from what the cache holds: an unchanged status costs no request, and so
// wakes no watch and starts no loop.
func (c *Controller) patchStatus(ctx context.Context, pk *parentKind, parent *unstructured.Unstructured, status map[string]any) error {
	if sameJSON(currentStatus(parent), status) {
		return nil
	}
	patch, err := json.Marshal(map[string]any{
		// The resourceVersion makes the patch fail with a conflict, rather
		// than overwrite, if the status changed since it was read.
		"metadata": map[string]any{"resourceVersion": parent.GetResourceVersion()},
		"status":   status,
	})
	if err != nil {
		return terminal(fmt.Errorf("encoding status: %w", err))
	}
	_, err = c.opts.Dynamic.Resource(pk.res.GVR()).Namespace(parent.GetNamespace()).
		Patch(ctx, parent.GetName(), types.MergePatchType, patch, metav1.PatchOptions{FieldManager: FieldManager}, "status")
	if err != nil {
		return fmt.Errorf("patching status: %w", err)
	}
	c.opts.Metrics.statusPatches.WithLabelValues(pk.label).Inc()
	klog.FromContext(ctx).V(2).Info("Patched status", "phase", status["phase"])
	return nil
}

// childReadiness is what one child contributes to the status.
type childReadiness struct {
	ok             bool
	why            string
	desired, ready int64
}

// readiness applies the built-in rules: a Deployment is ready when its
// controller observed the current generation and updated and available
// replicas equal the desired count; a Service when it has a cluster IP, or
// for type LoadBalancer an ingress. Other kinds are ready once they exist.
func readiness(u *unstructured.Unstructured) childReadiness {
	switch u.GroupVersionKind().GroupKind().String() {
	case "Deployment.apps":
		desired := int64(1)
		if v, found, _ := unstructured.NestedInt64(u.Object, "spec", "replicas"); found {
			desired = v
		}
		observed, _, _ := unstructured.NestedInt64(u.Object, "status", "observedGeneration")
		updated, _, _ := unstructured.NestedInt64(u.Object, "status", "updatedReplicas")
		available, _, _ := unstructured.NestedInt64(u.Object, "status", "availableReplicas")
		ready, _, _ := unstructured.NestedInt64(u.Object, "status", "readyReplicas")
		r := childReadiness{desired: desired, ready: ready}
		switch {
		case observed < u.GetGeneration():
			r.why = "rollout not yet observed"
		case updated < desired || available < desired:
			r.why = fmt.Sprintf("%d of %d replicas updated and available", min(updated, available), desired)
		default:
			r.ok = true
		}
		return r
	case "Service":
		svcType, _, _ := unstructured.NestedString(u.Object, "spec", "type")
		if svcType == "LoadBalancer" {
			ingress, _, _ := unstructured.NestedSlice(u.Object, "status", "loadBalancer", "ingress")
			if len(ingress) == 0 {
				return childReadiness{why: "waiting for a load balancer ingress"}
			}
			return childReadiness{ok: true}
		}
		if svcType == "ExternalName" {
			return childReadiness{ok: true}
		}
		if ip, _, _ := unstructured.NestedString(u.Object, "spec", "clusterIP"); ip == "" {
			return childReadiness{why: "waiting for a cluster IP"}
		}
		return childReadiness{ok: true}
	}
	return childReadiness{ok: true}
}

// sameJSON compares two JSON values by their encoding, so that int64 and
// float64 holding the same number compare equal (decoders pick either).
func sameJSON(a, b any) bool {
	ja, errA := json.Marshal(a)
	jb, errB := json.Marshal(b)
	return errA == nil && errB == nil && bytes.Equal(ja, jb)
}
