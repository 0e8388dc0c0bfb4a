package registry

import (
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/cache"

	"stencil.dev/stencil/config"
)

// crd is a CRD as the API server returns it, before StripCRD.
func crd(established, served, deleting bool) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": "gizmos.toys.example.com"},
		"spec": map[string]any{"names": map[string]any{"kind": "Gizmo", "plural": "gizmos"},
			"versions": []any{map[string]any{"name": "v1", "served": served,
				"schema": map[string]any{"openAPIV3Schema": map[string]any{"type": "object",
					"properties": map[string]any{"status": map[string]any{"type": "object"}}}}}}},
		"status": map[string]any{"conditions": []any{
			map[string]any{"type": "NamesAccepted", "status": "True"},
			map[string]any{"type": "Established", "status": map[bool]string{true: "True", false: "False"}[established]},
		}},
	}}
	if deleting {
		u.Object["metadata"].(map[string]any)["deletionTimestamp"] = "2024-01-01T00:00:00Z"
	}
	return u
}

func TestServedKindAndStatusSchema(t *testing.T) {
	gizmos := config.Resource{Group: "toys.example.com", Version: "v1", Resource: "gizmos"}
	v2 := gizmos
	v2.Version = "v2"
	tests := []struct {
		name       string
		crd        *unstructured.Unstructured
		res        config.Resource
		wantKind   string
		wantServed bool
		wantSchema bool
	}{
		{"established and served", crd(true, true, false), gizmos, "Gizmo", true, true},
		{"not established yet", crd(false, true, false), gizmos, "", false, true},
		{"version not served", crd(true, false, false), gizmos, "", false, true},
		{"being deleted", crd(true, true, true), gizmos, "", false, true},
		{"another version", crd(true, true, false), v2, "", false, false},
		{"no CRD", nil, gizmos, "", false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store := cache.NewStore(cache.MetaNamespaceKeyFunc)
			if tt.crd != nil {
				stripped, err := StripCRD(tt.crd)
				if err != nil {
					t.Fatal(err)
				}
				if err := store.Add(stripped); err != nil {
					t.Fatal(err)
				}
			}
			kind, served := ServedKind(store, tt.res)
			if kind != tt.wantKind || served != tt.wantServed {
				t.Errorf("ServedKind = %q, %v; want %q, %v", kind, served, tt.wantKind, tt.wantServed)
			}
			s, ok := StatusSchema(store, tt.res)
			if ok != tt.wantSchema || (ok && !reflect.DeepEqual(s, map[string]any{"type": "object"})) {
				t.Errorf("StatusSchema = %#v, %v; want the status property's schema: %v", s, ok, tt.wantSchema)
			}
		})
	}
}
