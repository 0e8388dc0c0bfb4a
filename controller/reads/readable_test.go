package reads

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"

	"stencil.dev/stencil/config"
)

// TestCacheHoldsOnlyWhatAReadShows walks the read informers' stores: a
// Secret applied with kubectl (its last-applied annotation holds the
// password) and one whose own annotations repeat it, read without
// secretData, leave no byte of the password in the cache, listed or
// changed by a watch event, even while a read with secretData of the
// same Secrets runs its own informer (which keeps the data, and still
// neither last-applied nor managedFields). A ConfigMap's cache loses
// last-applied and managedFields too.
func TestCacheHoldsOnlyWhatAReadShows(t *testing.T) {
	const password = "hunter2-s3cret"
	encoded := base64.StdEncoding.EncodeToString([]byte(password))
	leaks := func(text string) bool {
		return strings.Contains(text, "hunter2") || strings.Contains(text, encoded[:12])
	}
	manifest := `{"apiVersion":"v1","kind":"Secret","metadata":{"name":"db-applied","namespace":"team-a"},"stringData":{"password":"` + password + `"}}`
	managed := []any{map[string]any{"manager": "kubectl-client-side-apply", "operation": "Update",
		"fieldsV1": map[string]any{"f:data": map[string]any{"f:password": map[string]any{}}}}}
	secret := func(name string, annotations map[string]any) *unstructured.Unstructured {
		u := obj("v1", "Secret", "team-a", name, map[string]any{"app": "db"}, map[string]any{"type": "Opaque",
			"data": map[string]any{"password": encoded}})
		md := u.Object["metadata"].(map[string]any)
		md["annotations"], md["managedFields"], md["resourceVersion"] = annotations, managed, "1"
		md["ownerReferences"] = []any{map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "name": "owner-" + password, "uid": "u"}}
		return u
	}
	cm := obj("v1", "ConfigMap", "team-a", "defaults", nil, map[string]any{"data": map[string]any{"region": "eu"}})
	cm.Object["metadata"].(map[string]any)["annotations"] = map[string]any{corev1.LastAppliedConfigAnnotation: `{"data":{"token":"` + password + `"}}`}
	cm.Object["metadata"].(map[string]any)["managedFields"] = managed

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	configMapsGVR := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		secretsGVR: "SecretList", configMapsGVR: "ConfigMapList"},
		secret("db-applied", map[string]any{corev1.LastAppliedConfigAnnotation: manifest}),
		secret("db-annotated", map[string]any{"team.example.com/password": password, "team.example.com/encoded": encoded}),
		cm)
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(schema.GroupVersionKind{Version: "v1", Kind: "Secret"}, meta.RESTScopeNamespace)
	mapper.Add(schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, meta.RESTScopeNamespace)
	w := New(ctx, Options{Dynamic: dyn, Mapper: mapper})
	src := w.Source(ctx)

	closed := config.Read{Name: "password", APIVersion: "v1", Kind: "Secret", ObjectName: "{{ .Spec.passwordSecret }}"}
	open := closed
	open.SecretData = true
	defaults := config.Read{Name: "defaults", APIVersion: "v1", Kind: "ConfigMap", ObjectName: "{{ .Spec.config }}"}

	// store returns the cache of the scope that serves rd, as JSON.
	store := func(rd config.Read) string {
		t.Helper()
		if _, err := src.Get(rd, "team-a", "none"); err != nil {
			t.Fatal(err)
		}
		w.mu.Lock()
		defer w.mu.Unlock()
		for sc, s := range w.scopes {
			if sc.gvr.Resource == strings.ToLower(rd.Kind)+"s" && sc.full == (!rd.IsSecret() || rd.SecretData) {
				text, err := json.Marshal(s.inf.GetStore().List())
				if err != nil {
					t.Fatal(err)
				}
				return string(text)
			}
		}
		t.Fatalf("no scope serves %s", rd.Name)
		return ""
	}
	closedStore := func(what string) {
		t.Helper()
		text := store(closed)
		if leaks(text) {
			t.Errorf("%s: the cache of a Secret read without secretData holds the password: %s", what, text)
		}
		for _, not := range []string{"last-applied", "team.example.com", "managedFields", "ownerReferences", "uid"} {
			if strings.Contains(text, not) {
				t.Errorf("%s: the cache of a Secret read without secretData holds %s: %s", what, not, text)
			}
		}
		if strings.Count(text, `"data":{"password":""}`) != 2 || strings.Count(text, `"app":"db"`) != 2 {
			t.Errorf("%s: the cache lacks the key names or labels a read shows: %s", what, text)
		}
	}

	closedStore("listed")
	text := store(defaults)
	if leaks(text) || strings.Contains(text, "managedFields") || !strings.Contains(text, `"region":"eu"`) {
		t.Errorf("a ConfigMap's cache: %s", text)
	}
	// The same Secrets read with secretData: their own informer keeps
	// the data; the other's cache still holds none of it.
	text = store(open)
	if strings.Count(text, `"password":"`+encoded+`"`) != 2 {
		t.Errorf("the cache of a read with secretData lacks the data: %s", text)
	}
	if strings.Contains(text, "last-applied") || strings.Contains(text, "managedFields") {
		t.Errorf("the cache of a read with secretData holds last-applied or managedFields: %s", text)
	}
	closedStore("beside a read with secretData")

	// A watch event goes through the same transform: a new annotation
	// that repeats the password reaches neither cache of a closed read.
	changed := secret("db-annotated", map[string]any{"team.example.com/again": password})
	changed.SetResourceVersion("2")
	if _, err := dyn.Resource(secretsGVR).Namespace("team-a").Update(ctx, changed, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(store(closed), `"resourceVersion":"2"`) {
		if time.Now().After(deadline) {
			t.Fatalf("the update never reached the cache: %s", store(closed))
		}
		time.Sleep(10 * time.Millisecond)
	}
	closedStore("after a watch event")
}
