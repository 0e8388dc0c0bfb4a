package entry

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"stencil.dev/stencil/config"
)

// load loads the config at path and compiles it.
func load(path string) ([]*Entry, error) {
	cfg, err := config.Load(path)
	if err != nil {
		return nil, err
	}
	return Compile(cfg)
}

// apiConfig writes a config whose entry's extra lines follow its
// templates, with the template it names; it returns the config's path.
func apiConfig(t *testing.T, extra string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "d.yaml.tmpl"), []byte("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	text := "resources:\n  - group: gen.example.com\n    version: v1\n    resource: gadgets\n    templates: [d.yaml.tmpl]\n" + extra
	path := filepath.Join(dir, "stencil.yaml")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// Every API field of an entry loads, and the CRD it generates carries it.
func TestEveryAPIField(t *testing.T) {
	entries, err := load(apiConfig(t, `    kind: Gadget
    shortNames: [gd]
    categories: [stencil]
    schema:
      spec:
        image: string | required=true minLength=1 maxLength=255 pattern="^[^\\s]+$" description="image"
        replicas: integer | default=2 minimum=0 maximum=20
        ratio: number | minimum=0.5
        debug: boolean | default=false
        tier: string | enum="web,batch" default="web"
        env: "map[string]string | maxProperties=50"
        hosts: "[]string | maxItems=100"
        extra: object
        autoscale:
          maxReplicas: integer | required=true minimum=1
      status:
        url: string
      validation:
        - {rule: "self.replicas <= 3 || self.image.startsWith('registry.internal/')", message: "too many"}
      printerColumns:
        - {name: Image, jsonPath: .spec.image, type: string, description: the image, priority: 1}
      preserveUnknownFields: false
`))
	if err != nil {
		t.Fatal(err)
	}
	r := entries[0]
	if r.CRD == nil {
		t.Fatal("no CRD generated")
	}
	c := r.CRD
	if c.Name != "gadgets.gen.example.com" || c.Spec.Names.Kind != "Gadget" || c.Spec.Names.ShortNames[0] != "gd" || c.Spec.Names.Categories[0] != "stencil" {
		t.Errorf("names: %s %+v", c.Name, c.Spec.Names)
	}
	v := c.Spec.Versions[0]
	spec := v.Schema.OpenAPIV3Schema.Properties["spec"]
	for _, f := range []string{"image", "replicas", "ratio", "debug", "tier", "env", "hosts", "extra", "autoscale"} {
		if _, ok := spec.Properties[f]; !ok {
			t.Errorf("spec.%s missing", f)
		}
	}
	if len(spec.XValidations) != 1 || spec.XValidations[0].Message != "too many" {
		t.Errorf("validations: %+v", spec.XValidations)
	}
	if _, ok := v.Schema.OpenAPIV3Schema.Properties["status"].Properties["url"]; !ok {
		t.Error("status.url missing")
	}
	var cols []string
	for _, col := range v.AdditionalPrinterColumns {
		cols = append(cols, col.Name)
	}
	if got := strings.Join(cols, ","); got != "Ready,Reason,Image,Age" {
		t.Errorf("printer columns %s", got)
	}

	entries, err = load(apiConfig(t, "    kind: Gadget\n    schema:\n      openAPIV3Schema: {type: object, properties: {size: {type: integer, minimum: 1}}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := entries[0].CRD.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"].Properties["size"]; !ok {
		t.Error("openAPIV3Schema: spec.size missing")
	}
}

// A chart entry's API from its chart, exposed: bitnami nginx.
func TestAPIFromChart(t *testing.T) {
	chart, err := filepath.Abs(filepath.Join("..", "templates", "chart", "testdata", "charts", "nginx"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "stencil.yaml")
	text := "resources:\n  - group: web.example.com\n    version: v1\n    resource: nginxes\n    kind: Nginx\n    chart: " + chart +
		"\n    schema: {fromChart: true, expose: [image.tag, replicaCount, service.type]}\n"
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	entries, err := load(path)
	if err != nil {
		t.Fatal(err)
	}
	spec := entries[0].CRD.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"]
	var got []string
	for k := range spec.Properties {
		got = append(got, k)
	}
	if len(got) != 3 || spec.Properties["image"].Properties["tag"].Type != "string" || spec.Properties["replicaCount"].Type != "integer" {
		t.Errorf("exposed spec: %v", got)
	}
	if _, ok := spec.Properties["podSecurityContext"]; ok {
		t.Error("podSecurityContext, not exposed, is in the spec")
	}
}

// Each mistake in an entry's API is a config error naming its path.
func TestAPIErrorsNameTheirPath(t *testing.T) {
	for _, c := range []struct{ name, extra, want string }{
		{"kind without schema", "    kind: Gadget\n", "kind: is for entries with a schema"},
		{"schema without kind", "    schema: {spec: {a: string}}\n", "kind: an entry with a schema names its kind"},
		{"bad kind", "    kind: gadget\n    schema: {spec: {a: string}}\n", "a kind is CamelCase"},
		{"two sources", "    kind: Gadget\n    schema: {spec: {a: string}, fromChart: true}\n", "exactly one of spec, openAPIV3Schema or fromChart"},
		{"fromChart without chart", "    kind: Gadget\n    schema: {fromChart: true}\n", "schema.fromChart: is for chart entries"},
		{"expose without fromChart", "    kind: Gadget\n    schema: {spec: {a: string}, expose: [a]}\n", "schema.expose: is for fromChart: true"},
		{"unknown type", "    kind: Gadget\n    schema: {spec: {a: strin}}\n", "schema.spec.a"},
		{"default over maximum", "    kind: Gadget\n    schema: {spec: {num: integer | default=9 maximum=5}}\n", "schema.spec.num: default is outside minimum/maximum"},
		{"status collides", "    kind: Gadget\n    schema: {spec: {a: string}, status: {phase: string}}\n", "schema.status.phase"},
		{"unknown schema field", "    kind: Gadget\n    schema: {spec: {a: string}, specs: {}}\n", `schema.specs: unknown field "specs"`},
	} {
		_, err := load(apiConfig(t, c.extra))
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "resources[0] (gadgets.v1.gen.example.com)") {
			t.Errorf("%s: %v, want an error at resources[0] containing %q", c.name, err, c.want)
		}
	}
}
