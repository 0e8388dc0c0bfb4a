package crd

import (
	"encoding/json"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"
)

// toJSON renders a schema as compact JSON, keys sorted, for comparisons.
func toJSON(t *testing.T, s any) string {
	t.Helper()
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// mustYAML decodes a YAML document into a map, as the config decoder does.
func mustYAML(t *testing.T, doc string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := yaml.Unmarshal([]byte(doc), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestSimpleField(t *testing.T) {
	tests := []struct {
		name, spec, want string
		required         bool
	}{
		{"string", "string", `{"type":"string"}`, false},
		{"integer", "integer", `{"type":"integer"}`, false},
		{"number", "number", `{"type":"number"}`, false},
		{"boolean", "boolean", `{"type":"boolean"}`, false},
		{"object", "object", `{"type":"object","x-kubernetes-preserve-unknown-fields":true}`, false},
		{"list", "[]string", `{"type":"array","items":{"type":"string"}}`, false},
		{"list of lists", "[][]integer", `{"type":"array","items":{"type":"array","items":{"type":"integer"}}}`, false},
		{"map", "map[string]string", `{"type":"object","additionalProperties":{"type":"string"}}`, false},
		{"required", "string | required=true", `{"type":"string"}`, true},
		{"required false", "string | required=false", `{"type":"string"}`, false},
		{"default integer", "integer | default=2", `{"type":"integer","default":2}`, false},
		{"default number", "number | default=2.5", `{"type":"number","default":2.5}`, false},
		{"default boolean", "boolean | default=true", `{"type":"boolean","default":true}`, false},
		{"default string quoted", `string | default="a b"`, `{"type":"string","default":"a b"}`, false},
		{"default string bare", `string | default=x`, `{"type":"string","default":"x"}`, false},
		{"default list", `[]string | default="[\"a\"]"`, `{"type":"array","default":["a"],"items":{"type":"string"}}`, false},
		{"minimum maximum", "integer | minimum=0 maximum=20", `{"type":"integer","maximum":20,"minimum":0}`, false},
		{"minLength maxLength", "string | minLength=1 maxLength=255", `{"type":"string","maxLength":255,"minLength":1}`, false},
		{"pattern", `string | pattern="^[^\\s]+$"`, `{"type":"string","pattern":"^[^\\s]+$"}`, false},
		{"enum string", `string | enum="a,b, c"`, `{"type":"string","enum":["a","b","c"]}`, false},
		{"enum integer", `integer | enum="1,2"`, `{"type":"integer","enum":[1,2]}`, false},
		{"maxItems", `[]string | maxItems=100`, `{"type":"array","maxItems":100,"items":{"type":"string"}}`, false},
		{"maxProperties", `map[string]string | maxProperties=50`, `{"type":"object","maxProperties":50,"additionalProperties":{"type":"string"}}`, false},
		{"description", `string | description="The image, with tag"`, `{"description":"The image, with tag","type":"string"}`, false},
		{"default in enum", `string | enum="a,b" default=b`, `{"type":"string","default":"b","enum":["a","b"]}`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, errs := Simple(map[string]any{"f": tt.spec}, field.NewPath("spec"))
			if len(errs) > 0 {
				t.Fatalf("errors: %v", errs)
			}
			if got := toJSON(t, s.Properties["f"]); got != tt.want {
				t.Errorf("got  %s\nwant %s", got, tt.want)
			}
			if got := len(s.Required) == 1; got != tt.required {
				t.Errorf("required = %v, want %v", s.Required, tt.required)
			}
		})
	}
}

func TestSimpleErrors(t *testing.T) {
	tests := []struct{ name, spec, want string }{
		{"unknown type", "strin", `spec.f: Invalid value: "strin": unknown type "strin"`},
		{"unknown list type", "[]foo", `unknown type "foo"`},
		{"unknown marker", "string | colour=red", `marker colour: unknown marker`},
		{"marker on wrong type", "integer | pattern=x", `marker pattern: does not apply to type integer`},
		{"default not integer", "integer | default=x", `marker default: "x" is not a number`},
		{"default not whole", "integer | default=1.5", `marker default: "1.5" is not an integer`},
		{"minimum not number", "integer | minimum=abc", `marker minimum: "abc" is not a number`},
		{"maxLength negative", "string | maxLength=-1", `marker maxLength: "-1" is not a non-negative integer`},
		{"bad boolean default", "boolean | default=yes", `marker default: "yes" is not a boolean`},
		{"bad required", "string | required=yes", `marker required: want true or false`},
		{"bad pattern", `string | pattern="("`, `marker pattern: error parsing regexp`},
		{"unterminated quote", `string | description="abc`, `marker description: unterminated`},
		{"no equals", `string | required`, `marker "required": want key=value`},
		{"twice", `string | maxLength=1 maxLength=2`, `marker maxLength: given twice`},
		{"minimum over maximum", "integer | minimum=5 maximum=1", `minimum 5 is greater than maximum 1`},
		{"default under minimum", "integer | default=0 minimum=1", `default is outside minimum/maximum`},
		{"default over maximum", "number | default=9.5 maximum=9", `default is outside minimum/maximum`},
		{"default outside enum", `string | enum="a,b" default=c`, `default is not one of enum`},
		{"default against pattern", `string | pattern="^a" default=b`, `default does not satisfy`},
		{"enum on list", `[]string | enum="a"`, `marker enum: does not apply to type array`},
		{"enum not typed", `integer | enum="1,x"`, `marker enum: "x" is not a number`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, errs := Simple(map[string]any{"f": tt.spec}, field.NewPath("spec"))
			if len(errs) == 0 {
				t.Fatalf("no error, want %q", tt.want)
			}
			if got := errs.ToAggregate().Error(); !strings.Contains(got, tt.want) || !strings.Contains(got, "spec.f") {
				t.Errorf("got %q, want it to name spec.f and contain %q", got, tt.want)
			}
		})
	}
}

func TestSimpleNested(t *testing.T) {
	fields := mustYAML(t, `
image: string | required=true maxLength=255 pattern="^[^\\s]+$"
replicas: integer | default=2 minimum=0 maximum=20
env: "map[string]string | maxProperties=50"
hosts: "[]string | maxItems=100"
ingress:
  enabled: boolean | default=false
  host: string | required=true
  tls:
    secret: string
`)
	s, errs := Simple(fields, field.NewPath("schema", "spec"))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	if got := strings.Join(s.Required, ","); got != "image" {
		t.Errorf("required = %q, want image", got)
	}
	ing := s.Properties["ingress"]
	if ing.Type != "object" || strings.Join(ing.Required, ",") != "host" || ing.Properties["tls"].Properties["secret"].Type != "string" {
		t.Errorf("ingress = %s", toJSON(t, ing))
	}
	if got := s.Properties["image"].Pattern; got != `^[^\s]+$` {
		t.Errorf("pattern = %q", got)
	}
	again, _ := Simple(fields, field.NewPath("schema", "spec"))
	if toJSON(t, s) != toJSON(t, again) {
		t.Error("output is not deterministic")
	}
}

func TestSimpleNestedErrorPath(t *testing.T) {
	fields := mustYAML(t, "ingress:\n  port: integer | minimum=x\n  other: 5\n")
	_, errs := Simple(fields, field.NewPath("schema", "spec"))
	got := errs.ToAggregate().Error()
	for _, want := range []string{"schema.spec.ingress.port", "marker minimum", "schema.spec.ingress.other"} {
		if !strings.Contains(got, want) {
			t.Errorf("errors %q do not contain %q", got, want)
		}
	}
}
