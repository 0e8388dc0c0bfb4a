package config

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// everyField sets every field docs/configuration.md documents.
const everyField = `
resources:
  - group: apps.example.com
    version: v1beta1
    resource: webapps
    templates:
      - web/deployment.yaml.tmpl
      - path: web/service.yaml.tmpl
        id: svc
        dependsOn: [web/deployment.yaml.tmpl]
        readyWhen:
          - {kind: Service, fieldPath: spec.clusterIP, nonEmpty: true}
          - {kind: Deployment, condition: {type: Available, status: "True"}}
          - {kind: RoleBinding, fieldPath: metadata.name, equals: 3}
    statusTemplate: web/status.yaml.tmpl
    helpers: [web/_helpers.tpl]
    namespaces: [team-a, team-b]
    selector: "tier in (web),!legacy"
    children:
      - {apiVersion: apps/v1, kind: Deployment}
      - {apiVersion: v1, kind: Service}
      - {apiVersion: rbac.authorization.k8s.io/v1, kind: RoleBinding}
      - {apiVersion: cert-manager.io/v1, kind: Certificate, resource: certificates}
    allowPermissionGrants: true
    identity: {tenant: builder}
    rollout: {maxInFlight: 3, maxFailed: "10%"}
    renderBudget: {steps: 3000000, stringBytes: 4194304, listItems: 100000, includeDepth: 100, timeoutSeconds: 5, memoryMiB: 512, resultNodes: 50000}
  - group: charts.example.com
    version: v1
    resource: hellos
    chart: ../../crds/charts/hello
    overrideValues:
      podAnnotations.team: platform
      replicaCount: 2
      debug: true
      image.repository: $STENCIL_TEST_REPO
      image.tag: a$b$
    tenantTemplates: true
    identity: {serviceAccount: hello-writer, namespace: stencil-system}
`

// TestEveryDocumentedField decodes a config that sets every documented
// field, with the values each field documents.
func TestEveryDocumentedField(t *testing.T) {
	cfg, err := ParseConfig(cfgPath, []byte(everyField))
	if err != nil {
		t.Fatal(err)
	}
	three, tenPct := intstr.FromInt32(3), intstr.FromString("10%")
	equals := Scalar("3")
	want := []Resource{{
		Group: "apps.example.com", Version: "v1beta1", Resource: "webapps",
		Templates: []Template{{Path: "web/deployment.yaml.tmpl"}, {
			Path: "web/service.yaml.tmpl", ID: "svc", DependsOn: []string{"web/deployment.yaml.tmpl"},
			ReadyWhen: []ReadyCheck{
				{Kind: "Service", FieldPath: "spec.clusterIP", NonEmpty: true},
				{Kind: "Deployment", Condition: &ConditionCheck{Type: "Available", Status: "True"}},
				{Kind: "RoleBinding", FieldPath: "metadata.name", Equals: &equals},
			},
		}},
		StatusTemplate: "web/status.yaml.tmpl",
		Helpers:        []string{"web/_helpers.tpl"},
		Namespaces:     []string{"team-a", "team-b"},
		Selector:       "tier in (web),!legacy",
		Children: []ChildKind{
			{APIVersion: "apps/v1", Kind: "Deployment"}, {APIVersion: "v1", Kind: "Service"},
			{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "RoleBinding"},
			{APIVersion: "cert-manager.io/v1", Kind: "Certificate", Resource: "certificates"},
		},
		AllowPermissionGrants: true,
		Identity:              &Identity{Tenant: "builder"},
		Rollout:               &Rollout{MaxInFlight: &three, MaxFailed: &tenPct},
		RenderBudget:          &DefaultRenderBudget,
	}, {
		Group: "charts.example.com", Version: "v1", Resource: "hellos",
		Chart: "../../crds/charts/hello",
		OverrideValues: map[string]string{
			"podAnnotations.team": "platform", "replicaCount": "2", "debug": "true",
			// As written: package entry expands $VAR (entry_test.go).
			"image.repository": "$STENCIL_TEST_REPO", "image.tag": "a$b$",
		},
		TenantTemplates: true,
		Identity:        &Identity{ServiceAccount: "hello-writer", Namespace: "stencil-system"},
	}}
	if !reflect.DeepEqual(cfg.Resources, want) {
		t.Errorf("decoded\n%s\nwant\n%s", asJSON(cfg.Resources), asJSON(want))
	}
}

// asJSON shows v in failure messages, where %+v would print Resource.String.
func asJSON(v any) string {
	b, _ := json.MarshalIndent(v, "", "  ")
	return string(b)
}

// TestEveryWatchesField reads a watches.yaml that sets every field
// helm-operator documents, and stencil's identity extension, into the
// chart entry it means.
func TestEveryWatchesField(t *testing.T) {
	chart, _ := filepath.Abs(filepath.Join("..", "crds", "charts", "hello"))
	path := filepath.Join(t.TempDir(), "watches.yaml")
	if err := os.WriteFile(path, []byte(`
- group: charts.example.com
  version: v1
  kind: Hello
  chart: `+chart+`
  overrideValues: {image.repository: $STENCIL_TEST_REPO, replicaCount: "2"}
  selector:
    matchLabels: {tier: web}
    matchExpressions: [{key: legacy, operator: DoesNotExist}]
  watchDependentResources: false
  reconcilePeriod: 1m
  maxConcurrentReconciles: 4
  identity: {tenant: builder}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := LoadWatches(path, func(gvk schema.GroupVersionKind) (string, error) { return "hellos", nil })
	if err != nil {
		t.Fatal(err)
	}
	want := []Resource{{
		Group: "charts.example.com", Version: "v1", Resource: "hellos", Chart: chart,
		OverrideValues: map[string]string{"image.repository": "$STENCIL_TEST_REPO", "replicaCount": "2"},
		Selector:       "!legacy,tier=web",
		Identity:       &Identity{Tenant: "builder"},
	}}
	if !reflect.DeepEqual(cfg.Resources, want) {
		t.Errorf("read\n%s\nwant\n%s", asJSON(cfg.Resources), asJSON(want))
	}
}

// TestWatchesErrorNaming pins how an error found in a watches file names
// its entry.
func TestWatchesErrorNaming(t *testing.T) {
	path := filepath.Join("testdata", "watches", "missing-chart.yaml")
	_, err := LoadWatches(path, func(schema.GroupVersionKind) (string, error) { return "hellos", nil })
	if err == nil {
		t.Fatal("no error")
	}
	dir, _ := filepath.Abs(filepath.Dir(path))
	got := strings.ReplaceAll(err.Error(), dir, "DIR")
	const want = "testdata/watches/missing-chart.yaml: watches[0] (charts.example.com/v1, Kind=Hello): chart: DIR/gone: no such file (looked for DIR/gone)"
	if got != want {
		t.Errorf("error\n%s\nwant\n%s", got, want)
	}
}

// TestDecodeLooksAtNoFile: Decode, what a reload poll runs, checks types
// but no file.
func TestDecodeLooksAtNoFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "stencil.yaml")
	if err := os.WriteFile(path, []byte("resources:"+entry+"    templates: [gone.tmpl]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if cfg, err := Decode(path); err != nil || cfg.Resources[0].Templates[0].Path != "gone.tmpl" {
		t.Errorf("Decode = %+v, %v", cfg, err)
	}
	if err := os.WriteFile(path, []byte("resources:"+entry+"    templates: 5\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Decode(path); err == nil || !strings.Contains(err.Error(), "templates: must be a list of paths") {
		t.Errorf("Decode err = %v", err)
	}
}
