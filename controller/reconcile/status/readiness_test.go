package status

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestDeploymentReadinessNamesWhyItIsStuck(t *testing.T) {
	d := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": "web", "generation": int64(1)},
		"spec":     map[string]any{"replicas": int64(1)},
		"status": map[string]any{
			"observedGeneration": int64(1), "replicas": int64(0),
			"conditions": []any{
				map[string]any{"type": "Available", "status": "False", "reason": "MinimumReplicasUnavailable", "message": "Deployment does not have minimum availability."},
				map[string]any{"type": "ReplicaFailure", "status": "True", "reason": "FailedCreate",
					"message": `Pod "web-1" is invalid: spec.containers[0].image: Invalid value: " pause": must not have leading or trailing whitespace`},
			},
		},
	}}
	r := ReadinessOf(d)
	want := `Replicas: 0/1: FailedCreate: Pod "web-1" is invalid: spec.containers[0].image: Invalid value: " pause": must not have leading or trailing whitespace`
	if r.OK || r.Why != want {
		t.Errorf("readiness = %+v, want not ok, why %q", r, want)
	}
	// Without such a condition the message is kstatus's alone.
	unstructured.RemoveNestedField(d.Object, "status", "conditions")
	if r := ReadinessOf(d); r.Why != "Replicas: 0/1" {
		t.Errorf("readiness without conditions: why %q", r.Why)
	}
}
