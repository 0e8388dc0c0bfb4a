package registry

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// The CRD's status schema decides which status fields stencil sends. The
// API server prunes every field a structural schema does not declare, so a
// field stencil sends and the schema lacks (a condition's
// observedGeneration, a field of the status template) never reaches the
// stored status: the desired status never equals the cached one, and each
// restart, with an empty status memo, sent one no-op patch per resource.
// Pruning the desired status by the same schema first makes the comparison
// exact, computed from the schema, not remembered per process.

// statusSchemaOf keeps, from a CRD version's schema, what its status
// accepts (for StripCRD, which drops the rest of the schema): the status
// property's schema; when the root preserves unknown fields and declares no
// status, a schema that keeps everything; when it declares no status, one
// that keeps nothing.
func statusSchemaOf(version map[string]any) any {
	root, ok, _ := unstructured.NestedMap(version, "schema", "openAPIV3Schema")
	if !ok {
		return nil // no schema: nothing is pruned
	}
	if status, ok, _ := unstructured.NestedMap(root, "properties", "status"); ok {
		return status // NestedMap copies
	}
	if root["x-kubernetes-preserve-unknown-fields"] == true {
		return map[string]any{"x-kubernetes-preserve-unknown-fields": true}
	}
	return map[string]any{"type": "object"}
}

// PruneBySchema returns v without the fields a structural schema s does not
// declare, as the API server prunes them. It never changes v.
func PruneBySchema(v any, s map[string]any) any {
	if s == nil {
		return v
	}
	preserve := s["x-kubernetes-preserve-unknown-fields"] == true
	switch v := v.(type) {
	case map[string]any:
		props, _ := s["properties"].(map[string]any)
		out := make(map[string]any, len(v))
		for k, e := range v {
			if ps, ok := props[k].(map[string]any); ok {
				out[k] = PruneBySchema(e, ps)
				continue
			}
			switch addl := s["additionalProperties"].(type) {
			case map[string]any:
				out[k] = PruneBySchema(e, addl)
				continue
			case bool:
				if addl {
					out[k] = e
					continue
				}
			}
			if preserve {
				out[k] = e
			}
		}
		return out
	case []any:
		items, _ := s["items"].(map[string]any)
		if items == nil {
			return v
		}
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = PruneBySchema(e, items)
		}
		return out
	}
	return v
}
