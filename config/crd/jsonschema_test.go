package crd

import (
	"os"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func TestFromJSONSchema(t *testing.T) {
	tests := []struct {
		name, schema, want string
		dropped            []string
	}{
		{"scalar keywords", `{"type":"string","description":"d","minLength":1,"maxLength":5,"pattern":"^a","default":"ab","enum":["ab","ac"]}`,
			`{"description":"d","type":"string","default":"ab","maxLength":5,"minLength":1,"pattern":"^a","enum":["ab","ac"]}`, nil},
		{"const", `{"type":"integer","const":3}`, `{"type":"integer","enum":[3]}`, nil},
		{"draft 4 exclusiveMinimum", `{"type":"number","minimum":0,"exclusiveMinimum":true,"maximum":1}`,
			`{"type":"number","maximum":1,"minimum":0,"exclusiveMinimum":true}`, nil},
		{"draft 6 exclusive bounds", `{"type":"integer","exclusiveMinimum":0,"exclusiveMaximum":10,"maximum":20}`,
			`{"type":"integer","maximum":10,"exclusiveMaximum":true,"minimum":0,"exclusiveMinimum":true}`, nil},
		{"nullable", `{"type":["string","null"]}`, `{"type":"string","nullable":true}`, nil},
		{"int or string", `{"type":["integer","string"]}`, `{"x-kubernetes-int-or-string":true}`, nil},
		{"union left out", `{"type":["string","boolean"]}`, `{"x-kubernetes-preserve-unknown-fields":true}`,
			[]string{"#/properties/f: type [string boolean] cannot be expressed in a CRD schema, left out"}},
		{"object without type", `{"properties":{"a":{"type":"string"}},"required":["a"]}`,
			`{"type":"object","required":["a"],"properties":{"a":{"type":"string"}}}`, nil},
		{"free-form object", `{"type":"object"}`, `{"type":"object","x-kubernetes-preserve-unknown-fields":true}`, nil},
		{"additionalProperties false", `{"type":"object","properties":{"a":{"type":"string"}},"additionalProperties":false}`,
			`{"type":"object","properties":{"a":{"type":"string"}}}`, nil},
		{"additionalProperties schema", `{"type":"object","additionalProperties":{"type":"integer"},"maxProperties":3}`,
			`{"type":"object","maxProperties":3,"additionalProperties":{"type":"integer"}}`, nil},
		{"additionalProperties beside properties", `{"type":"object","properties":{"a":{"type":"string"}},"additionalProperties":{"type":"string"}}`,
			`{"type":"object","properties":{"a":{"type":"string"}}}`, []string{"#/properties/f: additionalProperties beside properties"}},
		{"array", `{"type":"array","items":{"type":"string"},"minItems":1,"maxItems":3,"uniqueItems":true}`,
			`{"type":"array","maxItems":3,"minItems":1,"items":{"type":"string"},"x-kubernetes-list-type":"set"}`, nil},
		{"array without items", `{"type":"array"}`, `{"type":"array","items":{"x-kubernetes-preserve-unknown-fields":true}}`, nil},
		{"uniqueItems of objects", `{"type":"array","items":{"type":"object"},"uniqueItems":true}`,
			`{"type":"array","items":{"type":"object","x-kubernetes-preserve-unknown-fields":true}}`, []string{"#/properties/f: uniqueItems of non-scalar items"}},
		{"format kept", `{"type":"string","format":"date-time"}`, `{"type":"string","format":"date-time"}`, nil},
		{"format left out", `{"type":"string","format":"idn-email"}`, `{"type":"string"}`, []string{`#/properties/f: format "idn-email" cannot`}},
		{"pattern not RE2", `{"type":"string","pattern":"^(?!x)"}`, `{"type":"string"}`, []string{`#/properties/f: pattern "^(?!x)" (not RE2 syntax)`}},
		{"oneOf", `{"type":"string","oneOf":[{"type":"string"},{"type":"integer"}]}`, `{"type":"string"}`, []string{"#/properties/f: oneOf cannot"}},
		{"anyOf", `{"anyOf":[{"type":"string"},{"type":"null"}]}`, `{"x-kubernetes-preserve-unknown-fields":true}`, []string{"#/properties/f: anyOf cannot"}},
		{"others", `{"type":"object","patternProperties":{"^x":{}},"dependencies":{},"if":{},"then":{},"else":{},"not":{}}`,
			`{"type":"object","x-kubernetes-preserve-unknown-fields":true}`,
			[]string{"f: not cannot", "f: if cannot", "f: then cannot", "f: else cannot", "f: patternProperties cannot", "f: dependencies cannot"}},
		{"allOf merged", `{"allOf":[{"type":"object","properties":{"a":{"type":"string"}},"required":["a"]},{"properties":{"b":{"type":"integer"}},"required":["b"]}]}`,
			`{"type":"object","required":["a","b"],"properties":{"a":{"type":"string"},"b":{"type":"integer"}}}`, nil},
		{"allOf contradicting", `{"type":"string","allOf":[{"maxLength":3},{"maxLength":4}]}`, `{"type":"string","maxLength":3}`,
			[]string{"#/properties/f/allOf/1: keyword maxLength given twice"}},
		{"$ref to definitions", `{"$ref":"#/definitions/port","description":"the port"}`,
			`{"description":"the port","type":"integer","maximum":65535,"minimum":1}`, nil},
		{"$ref to $defs", `{"$ref":"#/$defs/name"}`, `{"type":"string","minLength":1}`, nil},
		{"$ref recursive", `{"$ref":"#/definitions/tree"}`,
			`{"type":"object","properties":{"children":{"type":"array","items":{"x-kubernetes-preserve-unknown-fields":true}},"name":{"type":"string"}}}`,
			[]string{"#/definitions/tree/properties/children/items: $ref #/definitions/tree (recursive) cannot"}},
		{"$ref to another file", `{"$ref":"other.json#/x"}`, `{"x-kubernetes-preserve-unknown-fields":true}`, []string{"#/properties/f: $ref other.json#/x cannot"}},
		{"$ref dangling", `{"$ref":"#/definitions/nosuch"}`, `{"x-kubernetes-preserve-unknown-fields":true}`, []string{"$ref #/definitions/nosuch cannot"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			doc := `{"type":"object","properties":{"f":` + tt.schema + `},
				"definitions":{"port":{"type":"integer","minimum":1,"maximum":65535},
					"tree":{"type":"object","properties":{"name":{"type":"string"},"children":{"type":"array","items":{"$ref":"#/definitions/tree"}}}}},
				"$defs":{"name":{"type":"string","minLength":1}}}`
			s, dropped, err := FromJSONSchema([]byte(doc))
			if err != nil {
				t.Fatal(err)
			}
			if got := toJSON(t, s.Properties["f"]); got != tt.want {
				t.Errorf("got  %s\nwant %s", got, tt.want)
			}
			all := strings.Join(dropped, "\n")
			for _, w := range tt.dropped {
				if !strings.Contains(all, w) {
					t.Errorf("dropped %q does not contain %q", all, w)
				}
			}
			if tt.dropped == nil && len(dropped) > 0 {
				t.Errorf("dropped %q, want nothing", all)
			}
		})
	}
}

func TestFromJSONSchemaNotObject(t *testing.T) {
	for _, doc := range []string{`{"type":"string"}`, `[1]`, `{`} {
		if _, _, err := FromJSONSchema([]byte(doc)); err == nil {
			t.Errorf("%s: no error", doc)
		}
	}
}

// nginx reads the vendored bitnami nginx chart's schema and values.
func nginx(t *testing.T) (declared, inferred []byte) {
	t.Helper()
	dir := "../../templates/chart/testdata/charts/nginx/"
	declared, err := os.ReadFile(dir + "values.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	inferred, err = os.ReadFile(dir + "values.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return declared, inferred
}

func TestNginxChart(t *testing.T) {
	doc, valuesYAML := nginx(t)
	declared, dropped, err := FromJSONSchema(doc)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("left out: %q", dropped)
	if got := declared.Properties["replicaCount"].Type; got != "integer" {
		t.Errorf("replicaCount type = %q", got)
	}
	// values.schema.json does not declare image: Expose refuses it there.
	expose := []string{"image.tag", "replicaCount", "service.type"}
	if _, errs := Expose(declared, expose, field.NewPath("schema", "expose")); !strings.Contains(errs.ToAggregate().Error(), `schema.expose[0]: Invalid value: "image.tag"`) {
		t.Errorf("image.tag not refused from values.schema.json alone: %v", errs)
	}
	spec, errs := Expose(Complete(declared, FromValues(mustYAML(t, string(valuesYAML)))), expose, field.NewPath("schema", "expose"))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	if got := strings.Join(sortedKeys(spec.Properties), ","); got != "image,replicaCount,service" {
		t.Errorf("spec fields = %s", got)
	}
	d := Definition{Group: "charts.example.com", Version: "v1", Plural: "nginxes", Kind: "Nginx", Spec: spec,
		Rules: []Rule{{Rule: "self.replicaCount <= 10", Message: "at most 10 replicas"}}}
	crd, errs := Build(d, field.NewPath("schema"))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	s := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"]
	if s.Properties["image"].Properties["tag"].Type != "string" || s.Properties["service"].Properties["type"].Type != "string" {
		t.Errorf("spec = %s", toJSON(t, s))
	}
}

func TestNginxWholeSchemaBuilds(t *testing.T) {
	doc, valuesYAML := nginx(t)
	declared, _, err := FromJSONSchema(doc)
	if err != nil {
		t.Fatal(err)
	}
	for name, spec := range map[string]any{"values.schema.json": declared, "values.yaml": FromValues(mustYAML(t, string(valuesYAML)))} {
		d := Definition{Group: "charts.example.com", Version: "v1", Plural: "nginxes", Kind: "Nginx"}
		d.Spec = spec.(*apiextensionsv1.JSONSchemaProps)
		if _, errs := Build(d, field.NewPath("schema")); len(errs) > 0 {
			t.Errorf("%s: %v", name, errs)
		}
	}
}

func TestFromJSONSchemaBuilds(t *testing.T) {
	doc := `{"$schema":"http://json-schema.org/draft-04/schema#","type":"object","properties":{
		"port":{"type":["integer","string"]},
		"name":{"type":["string","null"],"default":null},
		"ratio":{"type":"number","minimum":0,"exclusiveMinimum":true},
		"hosts":{"type":"array","items":{"type":"string","format":"hostname"},"uniqueItems":true},
		"labels":{"type":"object","additionalProperties":{"type":"string"}},
		"extra":{"type":"object","additionalProperties":true},
		"mode":{"oneOf":[{"const":"a"},{"const":"b"}]},
		"tree":{"$ref":"#/definitions/tree"}},
		"definitions":{"tree":{"type":"object","properties":{"sub":{"$ref":"#/definitions/tree"}}}}}`
	spec, dropped, err := FromJSONSchema([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	if len(dropped) != 2 {
		t.Errorf("dropped = %q, want oneOf and the recursive $ref", dropped)
	}
	d := Definition{Group: "charts.example.com", Version: "v1", Plural: "things", Kind: "Thing", Spec: spec}
	if _, errs := Build(d, field.NewPath("schema")); len(errs) > 0 {
		t.Error(errs)
	}
}
