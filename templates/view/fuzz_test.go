package view

import (
	"encoding/json"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// FuzzNewObject converts arbitrary JSON objects: no panic, and a successful
// result is deep-copyable and detached from the input.
func FuzzNewObject(f *testing.F) {
	for _, seed := range []string{
		`{"kind":"WebApp","metadata":{"name":"demo","namespace":"x","generation":2},"spec":{"image":"x","replicas":2}}`,
		`{"kind":"WebApp","spec":[]}`,
		`{"kind":"WebApp","metadata":{"labels":{"a":1}}}`,
		`{"kind":"WebApp","metadata":{"generation":1e300}}`,
		`{"kind":"WebApp","spec":{"n":123456789012345678901234567890,"f":1.5e-300}}`,
		`{"kind":7,"status":null}`,
		`{"kind":"K","metadata":"x"}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var m map[string]any
		if err := json.Unmarshal(data, &m); err != nil || m == nil {
			return
		}
		u := &unstructured.Unstructured{Object: m}
		obj, err := NewObject(u, webapps)
		if err != nil {
			return
		}
		_ = runtime.DeepCopyJSONValue(obj.Spec)
		_ = runtime.DeepCopyJSONValue(obj.Status)
		obj.Spec["fuzz-marker"] = true
		if spec, ok := m["spec"].(map[string]any); ok {
			if _, leaked := spec["fuzz-marker"]; leaked {
				t.Fatal("Spec aliases the input")
			}
		}
	})
}
