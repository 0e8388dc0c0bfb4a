package config

import (
	"slices"
	"strings"
	"testing"
)

// withChildren is an entry listing Deployment, Service and ConfigMap.
const withChildren = entry + "    children:\n" +
	"      - {apiVersion: apps/v1, kind: Deployment}\n" +
	"      - {apiVersion: v1, kind: Service}\n" +
	"      - {apiVersion: v1, kind: ConfigMap}\n"

func TestTemplateItemsDecodeAsPathsOrMappings(t *testing.T) {
	cfg, err := ParseConfig(cfgPath, []byte("resources:"+withChildren+`    templates:
      - path: web/service.yaml.tmpl
        id: db
        readyWhen:
          - {kind: Service, fieldPath: spec.clusterIP, nonEmpty: true}
          - {kind: Deployment, condition: {type: Available, status: "True"}}
          - {kind: ConfigMap, fieldPath: data.replicas, equals: 3}
      - path: web/deployment.yaml.tmpl
        dependsOn: [db]
      - web/status.yaml.tmpl
`))
	if err != nil {
		t.Fatal(err)
	}
	ts := cfg.Resources[0].Templates
	if len(ts) != 3 || ts[0].Name() != "db" || ts[1].Name() != "web/deployment.yaml.tmpl" || !slices.Equal(ts[1].DependsOn, []string{"db"}) || ts[2].Path != "web/status.yaml.tmpl" {
		t.Fatalf("templates = %+v", ts)
	}
	if c := ts[0].ReadyWhen[2]; c.Equals == nil || *c.Equals != "3" {
		t.Errorf("equals: 3 decoded as %+v, want the string 3", c)
	}
	if order, cycle := TemplateOrder(ts); cycle != nil || !slices.Equal(order, []int{0, 1, 2}) {
		t.Errorf("order %v, cycle %v", order, cycle)
	}
}

func TestTemplateOrderPutsDependenciesFirst(t *testing.T) {
	items := []Template{{Path: "app", DependsOn: []string{"db"}}, {Path: "cm"}, {Path: "x", ID: "db", DependsOn: []string{"cm"}}}
	order, cycle := TemplateOrder(items)
	if cycle != nil || !slices.Equal(order, []int{1, 2, 0}) {
		t.Errorf("order %v, cycle %v; want [1 2 0]", order, cycle)
	}
}

func TestDependencyErrorsNameWhatIsWrong(t *testing.T) {
	const web = "testdata/stencil.yaml: resources[0] (webapps.v1beta1.apps.example.com): "
	for _, tc := range []struct {
		name, templates string
		want            []string
	}{
		{"cycle", `
      - {path: web/service.yaml.tmpl, id: a, dependsOn: [b]}
      - {path: web/deployment.yaml.tmpl, id: b, dependsOn: [c]}
      - {path: web/status.yaml.tmpl, id: c, dependsOn: [a]}
`, []string{web + "templates: dependsOn forms a cycle: a -> b -> c -> a"}},
		{"unknown id", `
      - {path: web/service.yaml.tmpl, dependsOn: [database]}
`, []string{web + `templates[0].dependsOn[0]: "database" is not the id of a template of this entry`}},
		{"duplicate id", `
      - {path: web/service.yaml.tmpl, id: db}
      - {path: web/deployment.yaml.tmpl, id: db}
`, []string{web + `templates[1].id: "db" is also the id of templates[0]`}},
		{"readyWhen kind not listed", `
      - path: web/service.yaml.tmpl
        readyWhen: [{kind: StatefulSet, condition: {type: Ready, status: "True"}}]
`, []string{web + "templates[0].readyWhen[0].kind: StatefulSet is not a kind this entry's children list names"}},
		{"check with two tests", `
      - path: web/service.yaml.tmpl
        readyWhen: [{kind: Service, fieldPath: spec.clusterIP, nonEmpty: true, equals: x}]
`, []string{web + "templates[0].readyWhen[0]: needs exactly one of nonEmpty: true, equals or condition"}},
		{"bad field path", `
      - path: web/service.yaml.tmpl
        readyWhen: [{kind: Service, fieldPath: "status.ingress[x]", nonEmpty: true}]
`, []string{web + `templates[0].readyWhen[0].fieldPath: "status.ingress[x]": a list index must be a whole number`}},
		{"unknown field", `
      - {path: web/service.yaml.tmpl, dependson: [a]}
`, []string{web + `templates[0].dependson: unknown field "dependson" (known: path, id, dependsOn, readyWhen)`}},
		{"missing file", `
      - {path: web/gone.tmpl, id: gone}
`, []string{web + "templates[0].path: web/gone.tmpl: no such file"}},
	} {
		_, err := ParseConfig(cfgPath, []byte("resources:"+withChildren+"    templates:"+tc.templates))
		if err == nil {
			t.Errorf("%s: no error", tc.name)
			continue
		}
		lines := strings.Split(err.Error(), "\n")
		if len(lines) != len(tc.want) {
			t.Errorf("%s: got %d errors, want %d:\n%v", tc.name, len(lines), len(tc.want), err)
			continue
		}
		for i, want := range tc.want {
			if !strings.Contains(lines[i], want) {
				t.Errorf("%s: error %q\nwant it to contain %q", tc.name, lines[i], want)
			}
		}
	}
}

func TestReadyChecks(t *testing.T) {
	svc := map[string]any{
		"spec":   map[string]any{"clusterIP": "10.0.0.7", "ports": []any{map[string]any{"port": int64(5432)}}},
		"status": map[string]any{"loadBalancer": map[string]any{"ingress": []any{}}, "conditions": []any{map[string]any{"type": "Available", "status": "False"}}},
	}
	three := Scalar("5432")
	for _, tc := range []struct {
		check ReadyCheck
		want  bool
	}{
		{ReadyCheck{FieldPath: "spec.clusterIP", NonEmpty: true}, true},
		{ReadyCheck{FieldPath: "status.loadBalancer.ingress", NonEmpty: true}, false},
		{ReadyCheck{FieldPath: "status.loadBalancer.ingress[0].ip", NonEmpty: true}, false},
		{ReadyCheck{FieldPath: "spec.ports[0].port", Equals: &three}, true},
		{ReadyCheck{Condition: &ConditionCheck{Type: "Available", Status: "True"}}, false},
		{ReadyCheck{Condition: &ConditionCheck{Type: "Available", Status: "False"}}, true},
		{ReadyCheck{Condition: &ConditionCheck{Type: "Progressing", Status: "True"}}, false},
	} {
		if got := tc.check.Holds(svc); got != tc.want {
			t.Errorf("%s: Holds = %v, want %v", tc.check, got, tc.want)
		}
	}
}
