package controller

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	webappGVR     = schema.GroupVersionResource{Group: "apps.example.com", Version: "v1beta1", Resource: "webapps"}
	deploymentGVR = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
	serviceGVR    = schema.GroupVersionResource{Version: "v1", Resource: "services"}
)

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// webapp is a WebApp in namespace ns, as its informer caches it.
func webapp(name string, spec map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apps.example.com/v1beta1",
		"kind":       "WebApp",
		"metadata": map[string]any{
			"name": name, "namespace": "ns", "uid": "uid-" + name, "generation": int64(1), "resourceVersion": "1",
		},
		"spec": spec,
	}}
}
