package status

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
)

// Readiness is what one child contributes to the status.
type Readiness struct {
	// OK says the child is ready (kstatus Current).
	OK bool
	// Failed says kstatus found the child failed (not merely in progress).
	Failed bool
	// Why says what the child waits for, or why it failed.
	Why string
	// Desired and Ready count its replicas, for a workload.
	Desired, Ready int64
}

// ReadinessOf decides whether a child is ready with kstatus, the rules Flux
// and Helm 4 use: Current is ready, InProgress is progressing, Failed makes
// the parent Degraded with kstatus's message. kstatus knows Deployment,
// StatefulSet, DaemonSet, ReplicaSet, Job, PodDisruptionBudget,
// PersistentVolumeClaim and Service, and the generic conditions and
// observedGeneration rules for everything else (custom resources of other
// operators included); a kind with no status at all is Current once it
// exists.
//
// One rule is stencil's own, because kstatus does not have it: a
// LoadBalancer Service is ready only once it has an ingress. kstatus counts
// any Service as Current, but an application behind a load balancer is not
// reachable until the cloud has given it an address.
func ReadinessOf(u *unstructured.Unstructured) Readiness {
	r := Readiness{}
	r.Desired, r.Ready = replicaCounts(u)
	if u.GetKind() == "Service" && u.GroupVersionKind().Group == "" {
		svcType, _, _ := unstructured.NestedString(u.Object, "spec", "type")
		ingress, _, _ := unstructured.NestedSlice(u.Object, "status", "loadBalancer", "ingress")
		if svcType == "LoadBalancer" && len(ingress) == 0 {
			r.Why = "waiting for a load balancer ingress"
			return r
		}
	}
	res, err := status.Compute(u)
	if err != nil {
		r.Why = fmt.Sprintf("reading its status: %v", err)
		return r
	}
	switch res.Status {
	case status.CurrentStatus:
		r.OK = true
	case status.FailedStatus:
		r.Failed, r.Why = true, res.Message
	default:
		r.Why = res.Message
		if r.Why == "" {
			r.Why = string(res.Status)
		}
		if why := deploymentStuck(u); why != "" {
			r.Why += ": " + why
		}
	}
	return r
}

// deploymentStuck returns why a Deployment cannot create its pods, from its
// ReplicaFailure condition (the pod template is invalid, a quota is
// exceeded), which kstatus does not read: it reports the Deployment in
// progress, with only the replica counts. The Deployment controller names
// the cause and the field there (the fault suite's bad-input scenario: an
// image with a leading space passes Deployment validation, then every pod
// is refused); without it the resource said only "Available: 0/1".
func deploymentStuck(u *unstructured.Unstructured) string {
	if u.GetKind() != "Deployment" || u.GroupVersionKind().Group != "apps" {
		return ""
	}
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		if m, _ := c.(map[string]any); m["type"] == "ReplicaFailure" && m["status"] == "True" {
			return fmt.Sprintf("%v: %v", m["reason"], m["message"])
		}
	}
	return ""
}

// replicaCounts returns the desired and ready pods of a workload child, summed
// into the parent's replicas and readyReplicas; zero for other kinds.
func replicaCounts(u *unstructured.Unstructured) (desired, ready int64) {
	if u.GroupVersionKind().Group != "apps" {
		return 0, 0
	}
	switch u.GetKind() {
	case "Deployment", "StatefulSet", "ReplicaSet":
		desired = 1
		if v, found, _ := unstructured.NestedInt64(u.Object, "spec", "replicas"); found {
			desired = v
		}
		ready, _, _ = unstructured.NestedInt64(u.Object, "status", "readyReplicas")
	case "DaemonSet":
		desired, _, _ = unstructured.NestedInt64(u.Object, "status", "desiredNumberScheduled")
		ready, _, _ = unstructured.NestedInt64(u.Object, "status", "numberReady")
	}
	return desired, ready
}
