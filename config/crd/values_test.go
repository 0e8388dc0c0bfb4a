package crd

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

func TestFromValues(t *testing.T) {
	values := mustYAML(t, `
replicaCount: 1
ratio: 0.5
image: {registry: docker.io, tag: "1.25", pullPolicy: IfNotPresent}
enabled: true
hosts: [a.example.com, b.example.com]
ports: [{name: http, port: 80}]
extraEnv: []
podAnnotations: {}
affinity: null
`)
	values["big"] = int64(3)
	got := FromValues(values)
	want := map[string]string{
		"replicaCount":   `{"type":"integer"}`,
		"big":            `{"type":"integer"}`,
		"ratio":          `{"type":"number"}`,
		"image":          `{"type":"object","properties":{"pullPolicy":{"type":"string"},"registry":{"type":"string"},"tag":{"type":"string"}}}`,
		"enabled":        `{"type":"boolean"}`,
		"hosts":          `{"type":"array","items":{"type":"string"}}`,
		"ports":          `{"type":"array","items":{"type":"object","properties":{"name":{"type":"string"},"port":{"type":"integer"}}}}`,
		"extraEnv":       `{"type":"array","items":{"x-kubernetes-preserve-unknown-fields":true}}`,
		"podAnnotations": `{"type":"object","x-kubernetes-preserve-unknown-fields":true}`,
		"affinity":       `{"x-kubernetes-preserve-unknown-fields":true}`,
	}
	if got.Type != "object" || len(got.Required) > 0 || len(got.Properties) != len(want) {
		t.Fatalf("got %s", toJSON(t, got))
	}
	for name, w := range want {
		if g := toJSON(t, got.Properties[name]); g != w {
			t.Errorf("%s:\n got %s\nwant %s", name, g, w)
		}
	}
	d := webapp(t)
	d.Spec, d.Rules = got, nil
	if _, errs := Build(d, field.NewPath("schema")); len(errs) > 0 {
		t.Errorf("inferred schema refused: %v", errs)
	}
}

func TestExpose(t *testing.T) {
	s, errs := Simple(mustYAML(t, `
replicaCount: integer | required=true minimum=0
image:
  registry: string | required=true
  tag: string | required=true
  digest: string
service:
  type: string | enum="ClusterIP,NodePort"
  ports:
    http: integer
    https: integer
other: string | required=true
`), field.NewPath("x"))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	got, errs := Expose(s, []string{"image.tag", "replicaCount", "service", "service.type"}, field.NewPath("schema", "expose"))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	want := `{"type":"object","required":["replicaCount"],"properties":{` +
		`"image":{"type":"object","required":["tag"],"properties":{"tag":{"type":"string"}}},` +
		`"replicaCount":{"type":"integer","minimum":0},` +
		`"service":` + toJSON(t, s.Properties["service"]) + `}}`
	if g := toJSON(t, got); g != want {
		t.Errorf("got  %s\nwant %s", g, want)
	}
	if len(s.Properties) != 4 || len(s.Properties["image"].Properties) != 3 {
		t.Error("Expose changed its input")
	}
}

func TestExposeUnknownPath(t *testing.T) {
	s := FromValues(mustYAML(t, "image: {tag: x}\nreplicaCount: 1\n"))
	_, errs := Expose(s, []string{"image.tag", "image.digest", "replicas", "image.tag.x", ""}, field.NewPath("schema", "expose"))
	got := errs.ToAggregate().Error()
	for _, w := range []string{`schema.expose[1]: Invalid value: "image.digest": the schema has no field digest`, `schema.expose[2]: Invalid value: "replicas"`, `schema.expose[3]`, `schema.expose[4]`} {
		if !strings.Contains(got, w) {
			t.Errorf("errors %q do not contain %q", got, w)
		}
	}
	if strings.Contains(got, "expose[0]") {
		t.Errorf("image.tag refused: %s", got)
	}
}
