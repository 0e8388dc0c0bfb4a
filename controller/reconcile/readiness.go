package reconcile

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
)

// childReadiness is what one child contributes to the status.
type childReadiness struct {
	ok bool
	// failed: kstatus says the child failed (not merely in progress).
	failed         bool
	why            string
	desired, ready int64
}

// readiness decides whether a child is ready with kstatus, the rules Flux
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
func readiness(u *unstructured.Unstructured) childReadiness {
	r := childReadiness{}
	r.desired, r.ready = replicaCounts(u)
	if u.GetKind() == "Service" && u.GroupVersionKind().Group == "" {
		svcType, _, _ := unstructured.NestedString(u.Object, "spec", "type")
		ingress, _, _ := unstructured.NestedSlice(u.Object, "status", "loadBalancer", "ingress")
		if svcType == "LoadBalancer" && len(ingress) == 0 {
			r.why = "waiting for a load balancer ingress"
			return r
		}
	}
	res, err := status.Compute(u)
	if err != nil {
		r.why = fmt.Sprintf("reading its status: %v", err)
		return r
	}
	switch res.Status {
	case status.CurrentStatus:
		r.ok = true
	case status.FailedStatus:
		r.failed, r.why = true, res.Message
	default:
		r.why = res.Message
		if r.why == "" {
			r.why = string(res.Status)
		}
		if why := deploymentStuck(u); why != "" {
			r.why += ": " + why
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
