package status

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
)

// TestChildFailedIsFailedForKstatus checks that a parent whose Deployment is
// past its progress deadline says Ready False ChildFailed with Stalled, so
// that kstatus (and Flux, Argo CD) report it Failed: a person must act.
func TestChildFailedIsFailedForKstatus(t *testing.T) {
	child := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": "web", "namespace": "ns", "generation": int64(1)},
		"spec":     map[string]any{"replicas": int64(1), "progressDeadlineSeconds": int64(10)},
		"status": map[string]any{
			"observedGeneration": int64(1), "replicas": int64(1), "updatedReplicas": int64(1),
			"conditions": []any{map[string]any{
				"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded",
				"message": `ReplicaSet "web-1" has timed out progressing.`,
			}},
		},
	}}
	parent := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apps.example.com/v1", "kind": "WebApp",
		"metadata": map[string]any{"name": "web", "namespace": "ns", "generation": int64(1)},
	}}
	parent.Object["status"] = Desired(parent, Outcome{Live: []*unstructured.Unstructured{child}})

	res, err := status.Compute(parent)
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != status.FailedStatus {
		t.Errorf("kstatus = %s (%s), want %s", res.Status, res.Message, status.FailedStatus)
	}
	conds := Conditions(Current(parent))
	for _, c := range conds {
		if c.Type == "Reconciling" {
			t.Errorf("Reconciling is present: %+v", c)
		}
		if (c.Type == "Ready" || c.Type == "Stalled") && c.Reason != ReasonChildFailed {
			t.Errorf("%s reason = %s, want %s", c.Type, c.Reason, ReasonChildFailed)
		}
	}
	if len(conds) != 2 {
		t.Errorf("conditions = %+v, want Ready and Stalled", conds)
	}
}
