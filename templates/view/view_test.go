package view

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var webapps = schema.GroupVersionResource{Group: "apps.example.com", Version: "v1beta1", Resource: "webapps"}

func webapp() *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apps.example.com/v1beta1",
		"kind":       "WebApp",
		"metadata": map[string]any{
			"name":        "demo",
			"namespace":   "team-a",
			"uid":         "1234",
			"generation":  int64(3),
			"labels":      map[string]any{"tier": "web"},
			"annotations": map[string]any{"note": "x"},
		},
		"spec": map[string]any{
			"image":    "nginx",
			"replicas": int64(2),
			"ratio":    0.5,
			"ports":    []any{map[string]any{"port": int64(80)}},
		},
		// status.reads, stencil's record of what the last render read, is
		// not part of the view (Object.Status).
		"status": map[string]any{"phase": "Ready", "reads": []any{map[string]any{"kind": "ConfigMap", "name": "defaults", "resourceVersion": "7"}}},
	}}
}

func TestNewObject(t *testing.T) {
	u := webapp()
	before := u.DeepCopy()
	obj, err := NewObject(u, webapps)
	if err != nil {
		t.Fatal(err)
	}
	want := &Object{
		Name: "demo", Namespace: "team-a", UID: "1234", Generation: 3,
		Labels:      map[string]string{"tier": "web"},
		Annotations: map[string]string{"note": "x"},
		Spec: map[string]any{
			"image": "nginx", "replicas": int64(2), "ratio": 0.5,
			"ports": []any{map[string]any{"port": int64(80)}},
		},
		Status:   map[string]any{"phase": "Ready"},
		Resource: ResourceInfo{Group: "apps.example.com", Version: "v1beta1", Kind: "WebApp", Resource: "webapps"},
	}
	if !reflect.DeepEqual(obj, want) {
		t.Errorf("NewObject =\n%#v\nwant\n%#v", obj, want)
	}
	if obj.Resource.APIVersion() != "apps.example.com/v1beta1" {
		t.Errorf("APIVersion() = %q", obj.Resource.APIVersion())
	}
	if got := (ResourceInfo{Version: "v1", Kind: "Service"}).APIVersion(); got != "v1" {
		t.Errorf("core APIVersion() = %q, want v1", got)
	}

	// The object is a copy: changing it leaves the input alone, and the
	// input was not touched by the conversion.
	obj.Spec["image"] = "changed"
	obj.Spec["ports"].([]any)[0].(map[string]any)["port"] = int64(1)
	obj.Labels["tier"] = "changed"
	if !reflect.DeepEqual(u, before) {
		t.Errorf("NewObject mutated or aliased its input:\n%v\nwant\n%v", u.Object, before.Object)
	}
}

func TestNewObjectEmptyFieldsAreNotNil(t *testing.T) {
	u := &unstructured.Unstructured{Object: map[string]any{"kind": "WebApp", "metadata": map[string]any{"name": "x"}}}
	obj, err := NewObject(u, webapps)
	if err != nil {
		t.Fatal(err)
	}
	if obj.Labels == nil || obj.Annotations == nil || obj.Spec == nil || obj.Status == nil {
		t.Errorf("nil maps in %+v", obj)
	}
}

// A Go int in an unstructured map (from hand-built objects or a careless
// decoder) makes runtime.DeepCopyJSONValue panic; NewObject must normalise it.
func TestNewObjectNormalisesNumbers(t *testing.T) {
	u := webapp()
	spec := u.Object["spec"].(map[string]any)
	spec["replicas"] = 2 // Go int
	spec["small"] = int32(7)
	spec["big"] = uint64(1 << 63)
	spec["f32"] = float32(1.5)
	spec["num"] = json.Number("42")
	spec["fnum"] = json.Number("4.5")
	spec["list"] = []any{1, int8(2)}
	u.Object["metadata"].(map[string]any)["generation"] = 5 // Go int too
	obj, err := NewObject(u, webapps)
	if err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]any{
		"replicas": int64(2), "small": int64(7), "big": float64(1 << 63), "f32": 1.5,
		"num": int64(42), "fnum": 4.5, "list": []any{int64(1), int64(2)},
	} {
		if got := obj.Spec[k]; !reflect.DeepEqual(got, want) {
			t.Errorf("Spec[%q] = %#v (%T), want %#v (%T)", k, got, got, want, want)
		}
	}
	if obj.Generation != 5 {
		t.Errorf("Generation = %d, want 5", obj.Generation)
	}
	// The result must be safe for the apimachinery deep copy.
	_ = runtime.DeepCopyJSONValue(obj.Spec)
	if spec["replicas"] != 2 {
		t.Errorf("input changed: replicas = %#v", spec["replicas"])
	}
}

func TestNewObjectErrors(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(map[string]any)
		want   string
	}{
		{"no kind", func(o map[string]any) { delete(o, "kind") }, "object has no kind"},
		{"spec not a map", func(o map[string]any) { o["spec"] = "x" }, "reading .spec: x is of type string, want a mapping"},
		{"status a list", func(o map[string]any) { o["status"] = []any{} }, "reading .status:"},
		{"name not a string", func(o map[string]any) { o["metadata"].(map[string]any)["name"] = int64(1) }, "reading .metadata.name:"},
		{"labels not strings", func(o map[string]any) {
			o["metadata"].(map[string]any)["labels"] = map[string]any{"a": int64(1)}
		}, "reading .metadata.labels:"},
		{"generation not whole", func(o map[string]any) { o["metadata"].(map[string]any)["generation"] = 1.5 }, "reading .metadata.generation: 1.5 is not an integer"},
		{"unsupported value", func(o map[string]any) { o["spec"].(map[string]any)["ch"] = make(chan int) }, "reading .spec: ch: "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u := webapp()
			tt.mutate(u.Object)
			_, err := NewObject(u, webapps)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want it to contain %q", err, tt.want)
			}
		})
	}
	if _, err := NewObject(nil, webapps); err == nil {
		t.Error("NewObject(nil) succeeded")
	}
}

func TestCopyJSONValueTypeError(t *testing.T) {
	_, err := CopyJSONValue(map[string]any{"a": []any{struct{}{}}})
	var te *TypeError
	if !errors.As(err, &te) {
		t.Fatalf("err = %v, want *TypeError", err)
	}
	if err.Error() != "a: [0]: {} is of type struct {}, want a JSON value" {
		t.Errorf("err = %q", err)
	}
}
