package templates

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"stencil.dev/stencil/config"
)

// fakeLive holds live children by Kind/name; ready ones are listed.
type fakeLive struct {
	children map[string]*unstructured.Unstructured
	ready    map[string]bool
	// stale children are about to be written (Current is false).
	stale map[string]bool
}

func (l *fakeLive) Child(kind, name string) (*unstructured.Unstructured, bool) {
	u, ok := l.children[kind+"/"+name]
	return u, ok
}

func (l *fakeLive) Ready(u *unstructured.Unstructured) bool {
	return l.ready[u.GetKind()+"/"+u.GetName()]
}

func (l *fakeLive) Current(want, live *unstructured.Unstructured) bool {
	return !l.stale[want.GetKind()+"/"+want.GetName()]
}

func (l *fakeLive) add(u *unstructured.Unstructured, ready bool) {
	ref := u.GetKind() + "/" + u.GetName()
	l.children[ref], l.ready[ref] = u, ready
}

func newFakeLive() *fakeLive {
	return &fakeLive{children: map[string]*unstructured.Unstructured{}, ready: map[string]bool{}, stale: map[string]bool{}}
}

// dependentSet loads an entry whose db template renders a Service and a
// Deployment, whose app template depends on db and reads the Service's
// clusterIP, and whose status template reads the app Service's ingress.
func dependentSet(t *testing.T, readyWhen string) *Set {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{
		"db.tmpl": `apiVersion: v1
kind: Service
metadata: {name: {{ .Name }}-db}
spec: {ports: [{port: 5432}]}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: {{ .Name }}-db}
spec: {replicas: 1}
`,
		"app.tmpl": `apiVersion: apps/v1
kind: Deployment
metadata: {name: {{ .Name }}}
spec:
  template:
    spec:
      containers:
        - name: app
          env:
            - name: DB_HOST
              value: {{ (observed "Service" (printf "%s-db" .Name)).spec.clusterIP }}
`,
		"status.tmpl": `endpoint: {{ index (observed "Service" (printf "%s-db" .Name)).status "ip" }}
`,
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	configText := `resources:
  - group: apps.example.com
    version: v1beta1
    resource: webapps
    children:
      - {apiVersion: apps/v1, kind: Deployment}
      - {apiVersion: v1, kind: Service}
      - {apiVersion: v1, kind: Secret}
    statusTemplate: status.tmpl
    templates:
      - path: db.tmpl
        id: db
` + readyWhen + `      - path: app.tmpl
        dependsOn: [db]
`
	path := filepath.Join(dir, "stencil.yaml")
	if err := os.WriteFile(path, []byte(configText), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	s, err := Load(cfg, cfg.Resources[0], Options{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func liveObject(kind, name string, fields map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": kind,
		"metadata": map[string]any{"name": name, "namespace": "team-a", "managedFields": []any{map[string]any{"manager": "stencil"}}}}}
	for k, v := range fields {
		u.Object[k] = v
	}
	return u
}

func names(children []*unstructured.Unstructured) []string {
	var out []string
	for _, c := range children {
		out = append(out, c.GetKind()+"/"+c.GetName())
	}
	return out
}

// TestATemplateWaitsForTheChildrenItDependsOn: without live children the
// app waits for the database's first child; with the Service there but not
// ready, it waits for that; once every child of db is ready it renders,
// with the clusterIP read back.
func TestATemplateWaitsForTheChildrenItDependsOn(t *testing.T) {
	s := dependentSet(t, "")
	r, err := s.RenderWith(parent(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(names(r.Children), ","); got != "Service/demo-db,Deployment/demo-db" {
		t.Errorf("children %s, want only db's", got)
	}
	if len(r.Waits) != 1 || r.Waits[0].String() != "app.tmpl waits for Service/demo-db, which does not exist" {
		t.Errorf("waits %v", r.Waits)
	}
	if !r.StatusWaits || r.Status != nil {
		t.Errorf("status %v (waits %v): want it to wait for the Service", r.Status, r.StatusWaits)
	}

	live := newFakeLive()
	live.add(liveObject("Service", "demo-db", map[string]any{"spec": map[string]any{"clusterIP": "10.96.0.7"}, "status": map[string]any{"ip": "203.0.113.9"}}), true)
	live.add(liveObject("Deployment", "demo-db", nil), false)
	r, err = s.RenderWith(parent(), live)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Waits) != 1 || r.Waits[0].String() != "app.tmpl waits for Deployment/demo-db, which is not ready" {
		t.Errorf("waits %v", r.Waits)
	}
	if r.StatusWaits || r.Status["endpoint"] != "203.0.113.9" {
		t.Errorf("status %v, want the endpoint read from the Service", r.Status)
	}

	live.ready["Deployment/demo-db"] = true
	live.stale["Deployment/demo-db"] = true
	r, err = s.RenderWith(parent(), live)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Waits) != 1 || r.Waits[0].String() != "app.tmpl waits for Deployment/demo-db, which is being updated" {
		t.Errorf("with the database's Deployment about to change: waits %v", r.Waits)
	}

	live.stale["Deployment/demo-db"] = false
	r, err = s.RenderWith(parent(), live)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Waits) != 0 || len(r.Children) != 3 {
		t.Fatalf("waits %v, children %v; want all three rendered", r.Waits, names(r.Children))
	}
	env, _, _ := unstructured.NestedSlice(r.Children[2].Object, "spec", "template", "spec", "containers")
	if got := env[0].(map[string]any)["env"].([]any)[0].(map[string]any)["value"]; got != "10.96.0.7" {
		t.Errorf("DB_HOST = %v, want the Service's clusterIP", got)
	}
}

// TestReadyWhenReplacesTheReadinessRules: with readyWhen on the Service's
// clusterIP, the db template counts as ready once the Service has one,
// whatever the Deployment says; a hostile clusterIP lands as one value.
func TestReadyWhenReplacesTheReadinessRules(t *testing.T) {
	s := dependentSet(t, "        readyWhen: [{kind: Service, fieldPath: spec.clusterIP, nonEmpty: true}]\n")
	live := newFakeLive()
	live.add(liveObject("Service", "demo-db", map[string]any{"spec": map[string]any{"clusterIP": ""}, "status": map[string]any{"ip": "x"}}), true)
	live.add(liveObject("Deployment", "demo-db", nil), false)
	r, err := s.RenderWith(parent(), live)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Waits) != 1 || r.Waits[0].For != "Service/demo-db" || r.Waits[0].Reason != "is not ready" {
		t.Fatalf("waits %v, want app waiting for the Service's clusterIP", r.Waits)
	}
	hostile := "10.0.0.1\n          - name: INJECTED\n            value: \"yes\""
	live.children["Service/demo-db"].Object["spec"] = map[string]any{"clusterIP": hostile}
	r, err = s.RenderWith(parent(), live)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Waits) != 0 {
		t.Fatalf("waits %v with the clusterIP set", r.Waits)
	}
	containers, _, _ := unstructured.NestedSlice(r.Children[2].Object, "spec", "template", "spec", "containers")
	env := containers[0].(map[string]any)["env"].([]any)
	if len(env) != 1 || env[0].(map[string]any)["value"] != hostile {
		t.Errorf("env = %v, want one variable holding the hostile string as it is", env)
	}
}

// TestObservedNeverShowsASecretsData: a Secret's data and stringData, and
// any child's managedFields, are not in what observed returns; a template
// that reads them fails.
func TestObservedNeverShowsASecretsData(t *testing.T) {
	s := loadSet(t, Options{AllowedKinds: []schema.GroupVersionKind{{Version: "v1", Kind: "ConfigMap"}, {Version: "v1", Kind: "Secret"}}}, "cm.tmpl", `apiVersion: v1
kind: ConfigMap
metadata: {name: {{ .Name }}}
data:
  password: {{ (observed "Secret" "creds").data.password }}
`)
	live := newFakeLive()
	live.add(liveObject("Secret", "creds", map[string]any{"data": map[string]any{"password": "c2VjcmV0"}, "stringData": map[string]any{"password": "secret"}}), true)
	_, err := s.RenderWith(parent(), live)
	if err == nil || !strings.Contains(err.Error(), `map has no entry for key "data"`) {
		t.Errorf("reading a Secret's data: err = %v, want the render to fail", err)
	}
	view := observedView(live.children["Secret/creds"])
	if _, ok := view["data"]; ok {
		t.Error("observed shows a Secret's data")
	}
	if _, ok := view["stringData"]; ok {
		t.Error("observed shows a Secret's stringData")
	}
	if _, ok := view["metadata"].(map[string]any)["managedFields"]; ok {
		t.Error("observed shows managedFields")
	}
	if _, ok := live.children["Secret/creds"].Object["data"]; !ok {
		t.Error("observed changed the live object")
	}
}

// TestObservedRefusesAKindTheEntryDoesNotList: a template reads only the
// resource's own children, of the kinds its entry lists.
func TestObservedRefusesAKindTheEntryDoesNotList(t *testing.T) {
	s := loadSet(t, Options{}, "d.tmpl", deployment+`  paused: {{ ready "Secret" "x" }}
`)
	_, err := s.RenderWith(parent(), newFakeLive())
	if err == nil || !strings.Contains(err.Error(), "Secret is not a kind this entry's children list names") {
		t.Errorf("err = %v", err)
	}
	if !s.ReadsLive() {
		t.Error("ReadsLive is false for a template that calls ready")
	}
	if loadSet(t, Options{}, "d.tmpl", deployment).ReadsLive() {
		t.Error("ReadsLive is true for a template that reads nothing live")
	}
}
