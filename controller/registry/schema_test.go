package registry

import (
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestPruneBySchema(t *testing.T) {
	status := map[string]any{
		"observedGeneration": int64(2), "phase": "Ready", "replicas": int64(1), "url": "http://x",
		"conditions": []any{map[string]any{"type": "Ready", "status": "True", "observedGeneration": int64(2)}},
		"extra":      map[string]any{"a": "b", "n": map[string]any{"x": int64(1)}},
	}
	obj := func(props map[string]any) map[string]any {
		return map[string]any{"type": "object", "properties": props}
	}
	str := map[string]any{"type": "string"}
	tests := []struct {
		name   string
		schema map[string]any
		want   map[string]any
	}{
		{"no schema keeps everything", nil, status},
		{"declared fields only, conditions without observedGeneration", obj(map[string]any{
			"phase": str, "url": str,
			"conditions": map[string]any{"type": "array", "items": obj(map[string]any{"type": str, "status": str})},
		}), map[string]any{"phase": "Ready", "url": "http://x",
			"conditions": []any{map[string]any{"type": "Ready", "status": "True"}}}},
		{"preserve-unknown-fields keeps the rest", map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true,
			"properties": map[string]any{"extra": obj(map[string]any{"a": str})}},
			map[string]any{"observedGeneration": int64(2), "phase": "Ready", "replicas": int64(1), "url": "http://x",
				"conditions": status["conditions"], "extra": map[string]any{"a": "b"}}},
		{"additionalProperties", obj(map[string]any{"extra": map[string]any{"type": "object",
			"additionalProperties": map[string]any{"x-kubernetes-preserve-unknown-fields": true}}}),
			map[string]any{"extra": map[string]any{"a": "b", "n": map[string]any{"x": int64(1)}}}},
		{"a CRD that declares no status keeps nothing", map[string]any{"type": "object"}, map[string]any{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := PruneBySchema(status, tt.schema)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %#v\nwant %#v", got, tt.want)
			}
		})
	}
}

func TestStatusSchemaOf(t *testing.T) {
	status := map[string]any{"type": "object", "properties": map[string]any{"phase": map[string]any{"type": "string"}}}
	for _, tt := range []struct {
		name    string
		version map[string]any
		want    any
	}{
		{"no schema", map[string]any{"name": "v1"}, nil},
		{"status declared", map[string]any{"schema": map[string]any{"openAPIV3Schema": map[string]any{
			"type": "object", "properties": map[string]any{"status": status}}}}, status},
		{"root preserves unknown fields", map[string]any{"schema": map[string]any{"openAPIV3Schema": map[string]any{
			"type": "object", "x-kubernetes-preserve-unknown-fields": true}}},
			map[string]any{"x-kubernetes-preserve-unknown-fields": true}},
		{"no status declared", map[string]any{"schema": map[string]any{"openAPIV3Schema": map[string]any{
			"type": "object", "properties": map[string]any{"spec": map[string]any{"type": "object"}}}}},
			map[string]any{"type": "object"}},
	} {
		if got := statusSchemaOf(tt.version); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s: got %#v, want %#v", tt.name, got, tt.want)
		}
	}
}

// StripCRD may run on an object it already stripped (client-go asks
// transforms to be idempotent): the status schema it kept must survive.
func TestStripCRDKeepsTheStatusSchemaTwice(t *testing.T) {
	status := map[string]any{"type": "object", "properties": map[string]any{"phase": map[string]any{"type": "string"}}}
	crd := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": "gizmos.example.com"},
		"spec": map[string]any{"versions": []any{map[string]any{"name": "v1", "served": true,
			"schema": map[string]any{"openAPIV3Schema": map[string]any{"type": "object",
				"properties": map[string]any{"status": status}}}}}},
	}}
	once, err := StripCRD(crd)
	if err != nil {
		t.Fatal(err)
	}
	twice, err := StripCRD(once)
	if err != nil {
		t.Fatal(err)
	}
	for name, obj := range map[string]any{"once": once, "twice": twice} {
		versions, _, _ := unstructured.NestedSlice(obj.(*unstructured.Unstructured).Object, "spec", "versions")
		if got := versions[0].(map[string]any)["statusSchema"]; !reflect.DeepEqual(got, status) {
			t.Errorf("stripped %s: statusSchema %#v, want %#v", name, got, status)
		}
	}
}
