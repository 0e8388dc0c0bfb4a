package reconcile

import (
	"encoding/json"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	core "k8s.io/client-go/testing"
	"k8s.io/klog/v2/ktesting"

	"stencil.dev/stencil/controller/reconcile/status"
	"stencil.dev/stencil/controller/reconcile/transform"
)

// TestAWaitingTemplateIsNotCreatedNotUpdatedAndNothingIsPruned: the app's
// Deployment waits for the database's Service to have a cluster IP. Until
// then it is not created; an existing one (from an earlier render) is not
// updated, and nothing is pruned, not even a child no template renders;
// the status names the waiting template and the child. Once the Service
// has a cluster IP, the Deployment is applied once, with the IP in its env.
func TestAWaitingTemplateIsNotCreatedNotUpdatedAndNothingIsPruned(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	f := newFixture(t)
	f.config = "testdata/stencil-depends.yaml"
	p := webapp("demo", map[string]any{"image": "nginx:1.27", "replicas": int64(2), "port": int64(80)})
	f.cache = append(f.cache, p)
	f.api = append(f.api, p)
	f.newReconciler(ctx)

	got := f.syncActions(ctx, "demo")
	if strings.Join(got, "\n") != "get services demo-db\npatch services demo-db (apply)\nget services demo\npatch services demo (apply)" {
		t.Fatalf("first sync: %v; want the two Services created, the Deployment waiting", got)
	}

	// The database's Service in the cache, without a cluster IP yet; an
	// old Deployment of the app, and a stray child no template renders.
	var created []*unstructured.Unstructured
	for _, a := range f.client.Actions() {
		if pa, ok := a.(core.PatchAction); ok {
			u := &unstructured.Unstructured{}
			must(t, json.Unmarshal(pa.GetPatch(), &u.Object))
			// As the API server stores it: stencil's field ownership.
			u = serverApply(t, nil, u)
			u.SetUID(types.UID("uid-" + u.GetName()))
			u.SetResourceVersion("1")
			created = append(created, u)
		}
	}
	// The API server gives a Service its cluster IP as it stores it
	// (serverApply does too); this one has none yet.
	unstructured.RemoveNestedField(created[0].Object, "spec", "clusterIP")
	for _, u := range created {
		must(t, f.c.reg.Child(u.GroupVersionKind()).Informers[""].GetIndexer().Add(u))
	}
	old := rendered(t, p)[0] // Deployment demo as the plain templates render it
	stray := created[1].DeepCopy()
	stray.SetName("demo-stray")
	for _, u := range []*unstructured.Unstructured{old, stray} {
		must(t, f.c.reg.Child(u.GroupVersionKind()).Informers[""].GetIndexer().Add(u))
	}
	got = f.syncActions(ctx, "demo")
	if len(got) != 1 || got[0] != "patch webapps/status demo" {
		t.Fatalf("while waiting: %v; want only the status patch (no apply, no delete)", got)
	}
	c := conditionOf(t, f.client.Actions()[0])
	if c["reason"] != status.ReasonWaitingForDependency || c["message"] != "app waits for Service/demo-db, which is not ready" {
		t.Errorf("Ready condition = %v", c)
	}

	// The cluster IP arrives: the app renders, reads it, and is applied.
	svc := created[0].DeepCopy()
	must(t, unstructured.SetNestedField(svc.Object, "10.96.0.9", "spec", "clusterIP"))
	svc.SetResourceVersion("2")
	must(t, f.c.reg.Child(schema.GroupVersionKind{Version: "v1", Kind: "Service"}).Informers[""].GetIndexer().Update(svc))
	got = f.syncActions(ctx, "demo")
	var applied *unstructured.Unstructured
	for _, a := range f.client.Actions() {
		if pa, ok := a.(core.PatchAction); ok && pa.GetResource().Resource == "deployments" {
			applied = &unstructured.Unstructured{}
			must(t, json.Unmarshal(pa.GetPatch(), &applied.Object))
		}
	}
	if applied == nil {
		t.Fatalf("once ready: %v; want the Deployment applied", got)
	}
	containers, _, _ := unstructured.NestedSlice(applied.Object, "spec", "template", "spec", "containers")
	if env := containers[0].(map[string]any)["env"].([]any); env[0].(map[string]any)["value"] != "10.96.0.9" {
		t.Errorf("DB_HOST = %v, want the Service's cluster IP", env)
	}
	if !strings.Contains(strings.Join(got, "\n"), "delete services demo-stray") {
		t.Errorf("once nothing waits: %v; want the stray Service pruned", got)
	}
}

// TestTheCachesKeepWhatTemplatesRead: the children of an owner kind whose
// entry reads live children are cached whole, but for a Secret's data and
// the last-applied annotation; every other child is cached lean, and
// marked so, so that a template never reads a lean copy.
func TestTheCachesKeepWhatTemplatesRead(t *testing.T) {
	c := New(Options{})
	c.ObserveKind(schema.GroupKind{Group: "apps.example.com", Kind: "WebApp"}, true)
	child := func(kind, ownerKind string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": kind,
			"metadata": map[string]any{"name": "x", "namespace": "ns",
				"annotations":     map[string]any{"kubectl.kubernetes.io/last-applied-configuration": "{}", "team": "a"},
				"ownerReferences": []any{map[string]any{"apiVersion": "apps.example.com/v1beta1", "kind": ownerKind, "name": "demo", "uid": "u", "controller": true}}},
			"spec": map[string]any{"ports": []any{map[string]any{"port": int64(80)}}, "clusterIP": "10.0.0.1"},
			"data": map[string]any{"k": "v"}, "stringData": map[string]any{"k": "v"}}}
		return u
	}
	whole, _ := c.TransformChild(child("Service", "WebApp"))
	u := whole.(*unstructured.Unstructured)
	if _, ok := u.Object["spec"].(map[string]any)["ports"]; !ok || u.GetAnnotations()["team"] != "a" {
		t.Errorf("a child templates read lost its spec or annotations: %v", u.Object)
	}
	if _, ok := u.GetAnnotations()["kubectl.kubernetes.io/last-applied-configuration"]; ok {
		t.Error("the last-applied annotation is cached")
	}
	if transform.IsLean(u) {
		t.Error("a whole child is marked lean")
	}
	secret, _ := c.TransformChild(child("Secret", "WebApp"))
	if s := secret.(*unstructured.Unstructured).Object; s["data"] != nil || s["stringData"] != nil {
		t.Errorf("a Secret's data is cached: %v", s)
	}
	lean, _ := c.TransformChild(child("Service", "Gizmo"))
	l := lean.(*unstructured.Unstructured)
	if _, ok := l.Object["spec"].(map[string]any)["ports"]; ok {
		t.Error("a child no template reads kept its whole spec")
	}
	if !transform.IsLean(l) {
		t.Error("a lean child is not marked")
	}
}
