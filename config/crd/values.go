package crd

import (
	"encoding/json"
	"math"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// FromValues infers a structural schema from the types of a chart's
// values.yaml: every value present becomes an optional field of its type
// (a list of the type of its first item; an empty list or map, or a null,
// preserves unknown fields). A whole number is an integer and a number
// with a fraction a number: values.yaml's replicaCount: 1 is an integer.
func FromValues(values map[string]any) *apiextensionsv1.JSONSchemaProps {
	return valueSchema(values)
}

// valueSchema infers the schema of one value.
func valueSchema(v any) *apiextensionsv1.JSONSchemaProps {
	switch v := v.(type) {
	case string:
		return &apiextensionsv1.JSONSchemaProps{Type: "string"}
	case bool:
		return &apiextensionsv1.JSONSchemaProps{Type: "boolean"}
	case int, int32, int64, uint, uint32, uint64:
		return &apiextensionsv1.JSONSchemaProps{Type: "integer"}
	case float32:
		return valueSchema(float64(v))
	case float64:
		if v == math.Trunc(v) && !math.IsInf(v, 0) {
			return &apiextensionsv1.JSONSchemaProps{Type: "integer"}
		}
		return &apiextensionsv1.JSONSchemaProps{Type: "number"}
	case json.Number:
		if _, err := v.Int64(); err == nil {
			return &apiextensionsv1.JSONSchemaProps{Type: "integer"}
		}
		return &apiextensionsv1.JSONSchemaProps{Type: "number"}
	case []any:
		item := &apiextensionsv1.JSONSchemaProps{XPreserveUnknownFields: ptrTo(true)}
		if len(v) > 0 {
			item = valueSchema(v[0])
		}
		return &apiextensionsv1.JSONSchemaProps{Type: "array", Items: &apiextensionsv1.JSONSchemaPropsOrArray{Schema: item}}
	case map[string]any:
		if len(v) == 0 {
			return &apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: ptrTo(true)}
		}
		s := &apiextensionsv1.JSONSchemaProps{Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{}}
		for k, x := range v {
			s.Properties[k] = *valueSchema(x)
		}
		return s
	}
	// null, or a type YAML does not decode to: any value.
	return &apiextensionsv1.JSONSchemaProps{XPreserveUnknownFields: ptrTo(true)}
}

// Complete adds to declared, a chart's values.schema.json translated, the
// fields it leaves undeclared that values.yaml has, with their inferred
// schema (FromValues), so that every value path of the chart can be
// exposed. Helm checks values.yaml against values.schema.json, so a field
// values.yaml has is one the schema allows. declared is not changed.
func Complete(declared, inferred *apiextensionsv1.JSONSchemaProps) *apiextensionsv1.JSONSchemaProps {
	out := declared.DeepCopy()
	if out.Type != "object" || out.Properties == nil || inferred == nil {
		return out
	}
	for name, in := range inferred.Properties {
		if have, ok := out.Properties[name]; ok {
			out.Properties[name] = *Complete(&have, &in)
		} else {
			out.Properties[name] = *in.DeepCopy()
		}
	}
	return out
}
