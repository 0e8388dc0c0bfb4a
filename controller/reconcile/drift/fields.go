package drift

import (
	"encoding/json"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// CompactManagedFields keeps each managedFields entry's field set as its
// JSON text instead of a tree of maps: a set is decoded only when drift or
// status needs it (FieldSet), and as a tree it is most of what a cached
// child weighs. Read the entries back with ManagedFields, not
// GetManagedFields.
func CompactManagedFields(u *unstructured.Unstructured) {
	md, _ := u.Object["metadata"].(map[string]any)
	entries, _ := md["managedFields"].([]any)
	for _, e := range entries {
		m, ok := e.(map[string]any)
		if !ok {
			continue
		}
		if set, ok := m["fieldsV1"].(map[string]any); ok {
			if raw, err := json.Marshal(set); err == nil {
				m["fieldsV1"] = string(raw)
			}
		}
	}
}

// ManagedFields returns the managedFields of u, whether its field sets are
// trees (as the API server sends them) or text (as the caches keep them).
// An entry that does not decode is left out, which can only make stencil
// apply once more, never skip a needed write.
func ManagedFields(u *unstructured.Unstructured) []metav1.ManagedFieldsEntry {
	md, _ := u.Object["metadata"].(map[string]any)
	entries, _ := md["managedFields"].([]any)
	out := make([]metav1.ManagedFieldsEntry, 0, len(entries))
	for _, e := range entries {
		m, ok := e.(map[string]any)
		if !ok {
			continue
		}
		var entry metav1.ManagedFieldsEntry
		entry.Manager, _ = m["manager"].(string)
		op, _ := m["operation"].(string)
		entry.Operation = metav1.ManagedFieldsOperationType(op)
		entry.APIVersion, _ = m["apiVersion"].(string)
		entry.Subresource, _ = m["subresource"].(string)
		entry.FieldsType, _ = m["fieldsType"].(string)
		switch set := m["fieldsV1"].(type) {
		case string:
			entry.FieldsV1 = &metav1.FieldsV1{Raw: []byte(set)}
		case map[string]any:
			raw, err := json.Marshal(set)
			if err != nil {
				continue
			}
			entry.FieldsV1 = &metav1.FieldsV1{Raw: raw}
		}
		out = append(out, entry)
	}
	return out
}
