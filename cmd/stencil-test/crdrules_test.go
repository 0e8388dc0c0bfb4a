package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// wingedConfig is the gadget config with the kind of CEL rule
// (ten wings need a keeper), a default the template does not share
// (replicas 3; the template's own fallback is 1), and a second entry,
// Flock, whose template renders a Gadget: a rendered object of the
// config's own kinds.
var wingedConfig = strings.Replace(gadgetTestConfig, `        replicas: integer | default=1 minimum=0 maximum=5
        debug: boolean
`, `        replicas: integer | default=3 minimum=0 maximum=5
        debug: boolean
        wings: integer | minimum=0
        keeper: string
      validation:
        - rule: "!has(self.wings) || self.wings < 10 || has(self.keeper)"
          message: ten wings need a keeper
`, 1) + `  - group: birds.example.com
    version: v1
    resource: flocks
    kind: Flock
    schema:
      spec:
        wings: integer | minimum=0
    templates: [flock.yaml.tmpl]
    children:
      - {apiVersion: gen.example.com/v1, kind: Gadget}
`

const flockTemplate = `apiVersion: gen.example.com/v1
kind: Gadget
metadata:
  name: {{ printf "%s-lead" .Name | quote }}
spec:
  image: registry.k8s.io/pause:3.10
  wings: {{ .Spec.wings | int64 }}
`

// writeWingedConfig writes wingedConfig over the gadget config, with the
// given test files; it returns the config's path.
func writeWingedConfig(t *testing.T, tests map[string]string) string {
	t.Helper()
	path := writeGadgetConfig(t, tests)
	for name, text := range map[string]string{"stencil.yaml": wingedConfig, "flock.yaml.tmpl": flockTemplate} {
		if err := os.WriteFile(filepath.Join(filepath.Dir(path), name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return path
}

// TestStencilTestCRDRules: a test resource is admitted as the API server
// admits it. One that breaks the CRD's CEL rule fails its case, naming the
// rule's message and the field, as kubectl would print the refusal; one
// within the rules passes; an expected refusal (error:) matches the rule's
// message; the schema's defaults are in the resource before it renders; a
// rendered object of the config's own kinds is held to the same rules; a
// mistyped field keeps the rules from running, as in the API server.
func TestStencilTestCRDRules(t *testing.T) {
	path := writeWingedConfig(t, map[string]string{"wings.yaml": `cases:
  - name: ten wings and no keeper
    resource: {apiVersion: gen.example.com/v1, kind: Gadget, metadata: {name: g}, spec: {image: x, wings: 10}}
    assert: ["true"]
  - name: ten wings and a keeper
    resource: {apiVersion: gen.example.com/v1, kind: Gadget, metadata: {name: g}, spec: {image: x, wings: 10, keeper: wren}}
    assert: ["true"]
  - name: the API server refuses ten wings alone
    resource: {apiVersion: gen.example.com/v1, kind: Gadget, metadata: {name: g}, spec: {image: x, wings: 10}}
    error: ten wings need a keeper
  - name: the default replicas renders
    resource: {apiVersion: gen.example.com/v1, kind: Gadget, metadata: {name: g, namespace: team-a}, spec: {image: x}}
    observed: [objects/db-live.yaml]
    assert:
      - "resource.spec.replicas == 3"
      - "objects.exists(o, o.kind == 'Deployment' && o.spec.replicas == 3)"
  - name: a flock's lead gadget has ten wings and no keeper
    resource: {apiVersion: birds.example.com/v1, kind: Flock, metadata: {name: f}, spec: {wings: 12}}
    assert: ["objects.size() == 1"]
  - name: a flock's lead gadget within the rules
    resource: {apiVersion: birds.example.com/v1, kind: Flock, metadata: {name: f}, spec: {wings: 2}}
    assert: ["objects.size() == 1"]
  - name: a mistyped field, so the rules do not run
    resource: {apiVersion: gen.example.com/v1, kind: Gadget, metadata: {name: g}, spec: {image: x, replicas: many, wings: 10}}
    assert: ["true"]
`})
	r := stencil(t, "", "test", "--config", path)
	r.expect(t, 1, []string{
		"FAIL ", "ten wings and no keeper",
		"the resource is refused by its entry's CRD: spec: Invalid value: ten wings need a keeper\n",
		"PASS ", "ten wings and a keeper", "the API server refuses ten wings alone", "the default replicas renders",
		"a flock's lead gadget has ten wings and no keeper", "Gadget f-lead: spec: Invalid value: ten wings need a keeper\n",
		"a flock's lead gadget within the rules",
		"a mistyped field, so the rules do not run (", `spec.replicas: Invalid value: "string": spec.replicas in body must be of type integer: "string"` +
			"\n    the resource is refused by its entry's CRD: <nil>: Invalid value: null: some validation rules were not checked",
		"4 passed, 3 failed",
	}, nil)
	t.Logf("%s", r.stdout)
}

// TestStencilTestCRDRuleDoesNotCompile: a CEL rule the API server would
// not compile (so it would refuse the CRD) is an invalid config: exit 2,
// naming the entry and the rule's field in the config.
func TestStencilTestCRDRuleDoesNotCompile(t *testing.T) {
	path := writeWingedConfig(t, map[string]string{"wings.yaml": "cases:\n  - {name: a, resource: objects/gadget.yaml, assert: [\"true\"]}\n"})
	cfg := strings.Replace(wingedConfig, "has(self.keeper)", "self.keepr != ''", 1)
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	r := stencil(t, "", "test", "--config", path)
	r.expect(t, 2, nil, []string{"resources[0] (gadgets.v1.gen.example.com)", "schema.validation[0].rule", "undefined field 'keepr'"})
	t.Logf("%s", r.stderr)
}
