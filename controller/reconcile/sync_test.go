package reconcile

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/dynamic"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	core "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2/ktesting"

	"stencil.dev/stencil/contract"
	"stencil.dev/stencil/controller/reconcile/drift"
	"stencil.dev/stencil/controller/reconcile/status"
	"stencil.dev/stencil/controller/reconcile/transform"
	"stencil.dev/stencil/controller/registry"
	"stencil.dev/stencil/controller/requeue"
	"stencil.dev/stencil/templates/view"

	"stencil.dev/stencil/config"
	"stencil.dev/stencil/templates"
)

var (
	webappGVR     = schema.GroupVersionResource{Group: "apps.example.com", Version: "v1beta1", Resource: "webapps"}
	webappGVK     = schema.GroupVersionKind{Group: "apps.example.com", Version: "v1beta1", Kind: "WebApp"}
	deploymentGVR = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
	serviceGVR    = schema.GroupVersionResource{Version: "v1", Resource: "services"}
)

// fixture is the sample-controller style harness: objects go into both the
// fake API (for writes) and the informer caches (for reads), then one sync
// runs and the test compares the API actions it made.
type fixture struct {
	t        *testing.T
	client   *dynamicfake.FakeDynamicClient
	recorder *record.FakeRecorder
	c        *Reconciler
	// queue receives what the reconciler queues (Options.Enqueue) and the
	// requeues its syncs ask for (see sync).
	queue workqueue.TypedDelayingInterface[Key]
	// cache holds objects for the informers; api holds objects for the fake client.
	cache, api []*unstructured.Unstructured
	// firstStatusDelay overrides Options.FirstStatusDelay (default 1ms).
	firstStatusDelay time.Duration
	// config is the config file (default testdata/stencil.yaml).
	config string
	// as receives the writes made as an entry's identity (the fake's
	// Options.Impersonate); users lists who they impersonated.
	as    *dynamicfake.FakeDynamicClient
	users []string
}

func newFixture(t *testing.T) *fixture {
	return &fixture{t: t}
}

func (f *fixture) newReconciler(ctx context.Context) {
	f.t.Helper()
	cfg, err := config.Load(cmp.Or(f.config, "testdata/stencil.yaml"))
	if err != nil {
		f.t.Fatal(err)
	}
	sets, err := templates.LoadAll(cfg, templates.Options{})
	if err != nil {
		f.t.Fatal(err)
	}
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(webappGVK, meta.RESTScopeNamespace)
	mapper.Add(schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, meta.RESTScopeNamespace)
	mapper.Add(schema.GroupVersionKind{Version: "v1", Kind: "Service"}, meta.RESTScopeNamespace)

	var objs []runtime.Object
	for _, o := range f.api {
		objs = append(objs, o.DeepCopy())
	}
	f.client = dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		webappGVR: "WebAppList", deploymentGVR: "DeploymentList", serviceGVR: "ServiceList",
	}, objs...)
	// The fake tracker cannot create objects by server-side apply; answer
	// applies and status patches the way the API server would, with the
	// object as written.
	f.as = dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		webappGVR: "WebAppList", deploymentGVR: "DeploymentList", serviceGVR: "ServiceList",
	})
	applied := func(action core.Action) (bool, runtime.Object, error) {
		p := action.(core.PatchAction)
		if p.GetPatchType() != types.ApplyPatchType {
			return true, &unstructured.Unstructured{Object: map[string]any{}}, nil
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(p.GetPatch()); err != nil {
			return true, nil, err
		}
		// Apply keeps what the live object has beyond the applied fields
		// (its status, defaults), as the API server does.
		for _, live := range f.cache {
			if live.GetKind() == u.GetKind() && live.GetName() == u.GetName() {
				merged := live.DeepCopy()
				mergeInto(merged.Object, u.Object)
				merged.SetResourceVersion(live.GetResourceVersion() + "1")
				return true, merged, nil
			}
		}
		return true, u, nil
	}
	f.client.PrependReactor("patch", "*", applied)
	f.as.PrependReactor("patch", "*", applied)
	f.recorder = record.NewFakeRecorder(100)
	// The registry watches a client of its own that holds only the
	// WebApp CRD, installed and Established: the resource is served, and
	// every cache starts empty and synced. The test then fills the caches
	// by hand, as sample-controller's tests fill their informers'.
	crd := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": "webapps.apps.example.com"},
		"spec": map[string]any{"group": "apps.example.com", "scope": "Namespaced",
			"names":    map[string]any{"kind": "WebApp", "plural": "webapps"},
			"versions": []any{map[string]any{"name": "v1beta1", "served": true, "storage": true}}},
		"status": map[string]any{"conditions": []any{map[string]any{"type": "Established", "status": "True"}}},
	}}
	watched := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		registry.CRDResource: "CustomResourceDefinitionList", webappGVR: "WebAppList", deploymentGVR: "DeploymentList", serviceGVR: "ServiceList",
	}, crd)
	reg, err := registry.New(ctx, registry.Options{Dynamic: watched, Mapper: mapper,
		Hooks: registry.Hooks{ParentTransform: transform.Parent, ChildTransform: transform.Lean}}, cfg, sets)
	must(f.t, err)
	regCtx, stop := context.WithCancel(ctx)
	f.t.Cleanup(stop)
	reg.Start(regCtx)
	if !cache.WaitForCacheSync(regCtx.Done(), reg.Synced) {
		f.t.Fatal("the CRD and child caches did not sync")
	}
	reg.Refresh(regCtx)
	if !cache.WaitForCacheSync(regCtx.Done(), reg.Synced) || reg.Parent(webappGVR) == nil || !reg.Parent(webappGVR).Served {
		f.t.Fatal("webapps is not served")
	}
	for _, o := range f.cache {
		switch o.GroupVersionKind().Kind {
		case "WebApp":
			must(f.t, reg.Parent(webappGVR).Informers[""].GetIndexer().Add(o))
		default:
			must(f.t, reg.Child(o.GroupVersionKind()).Informers[""].GetIndexer().Add(o))
		}
	}
	f.queue = workqueue.NewTypedDelayingQueue[Key]()
	f.t.Cleanup(f.queue.ShutDown)
	impersonate := func(user string) (dynamic.Interface, error) {
		f.users = append(f.users, user)
		return f.as, nil
	}
	f.c = New(Options{Registry: reg, Dynamic: f.client, Impersonate: impersonate, Recorder: f.recorder, Metrics: NewMetrics(prometheus.NewRegistry()),
		Enqueue: f.queue.Add, FightBurst: 5, FightInterval: 10 * time.Second,
		ConflictRecheck: time.Millisecond, FirstStatusDelay: cmp.Or(f.firstStatusDelay, time.Millisecond)})
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// sync runs one sync of key and schedules the requeue it asks for, as
// the controller's handleErr does; it returns the sync's error.
func (f *fixture) sync(ctx context.Context, key Key) error {
	after, err := requeue.Split(f.c.Sync(ctx, key))
	if after > 0 {
		f.queue.AddAfter(key, after)
	}
	return err
}

// run syncs the WebApp ns/name once and returns the API actions, with the
// informers' list and watch calls left out.
func (f *fixture) run(name string) ([]core.Action, error) {
	f.t.Helper()
	_, ctx := ktesting.NewTestContext(f.t)
	f.newReconciler(ctx)
	err := f.sync(ctx, Key{GVR: webappGVR, NamespacedName: types.NamespacedName{Namespace: "ns", Name: name}})
	var actions []core.Action
	for _, a := range f.client.Actions() {
		if a.GetVerb() == "list" || a.GetVerb() == "watch" {
			continue
		}
		actions = append(actions, a)
	}
	return actions, err
}

// describe renders actions as "verb resource[/subresource] name" lines.
func describe(actions []core.Action) []string {
	var out []string
	for _, a := range actions {
		s := a.GetVerb() + " " + a.GetResource().Resource
		if a.GetSubresource() != "" {
			s += "/" + a.GetSubresource()
		}
		switch a := a.(type) {
		case core.PatchAction:
			s += " " + a.GetName()
			if a.GetPatchType() == types.ApplyPatchType {
				s += " (apply)"
			}
		case core.GetAction:
			s += " " + a.GetName()
		case core.CreateAction:
			if m, err := meta.Accessor(a.GetObject()); err == nil {
				s += " " + m.GetName()
			}
		case core.DeleteAction:
			s += " " + a.GetName()
		}
		out = append(out, s)
	}
	return out
}

func webapp(name string, spec map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apps.example.com/v1beta1",
		"kind":       "WebApp",
		"metadata": map[string]any{
			"name": name, "namespace": "ns", "uid": "uid-" + name, "generation": int64(1), "resourceVersion": "1",
		},
		"spec": spec,
	}}
	return u
}

// rendered renders parent's children as the controller would, then turns
// them into "live" objects: stamped with the applied hash, given a UID, and
// with ready status, so a sync sees a converged child.
func rendered(t *testing.T, parent *unstructured.Unstructured) []*unstructured.Unstructured {
	t.Helper()
	return renderedWith(t, "testdata/stencil.yaml", parent)
}

// renderedWith is rendered with the templates of the config at path.
func renderedWith(t *testing.T, path string, parent *unstructured.Unstructured) []*unstructured.Unstructured {
	t.Helper()
	return renderedLive(t, path, parent, false)
}

// renderedLive is renderedWith; with legacy, each child carries the
// template revision annotation, covered by its applied hash, as earlier
// versions of stencil wrote every child of a rollout entry.
func renderedLive(t *testing.T, path string, parent *unstructured.Unstructured, legacy bool) []*unstructured.Unstructured {
	t.Helper()
	cfg, err := config.Load(path)
	must(t, err)
	sets, err := templates.LoadAll(cfg, templates.Options{})
	must(t, err)
	obj, err := view.NewObject(parent, webappGVR)
	must(t, err)
	children, err := sets[0].Render(obj)
	must(t, err)
	for i, c := range children {
		if legacy {
			drift.StampRevision(c, sets[0].Revision())
		}
		_, err := drift.StampHash(c)
		must(t, err)
		c = serverApply(t, nil, c)
		children[i] = c
		c.SetUID(types.UID("uid-" + strings.ToLower(c.GetKind()) + "-" + c.GetName()))
		c.SetResourceVersion("1")
		switch c.GetKind() {
		case "Deployment":
			c.SetGeneration(1)
			replicas, _, _ := unstructured.NestedInt64(c.Object, "spec", "replicas")
			must(t, unstructured.SetNestedField(c.Object, map[string]any{
				"observedGeneration": int64(1), "replicas": replicas, "updatedReplicas": replicas,
				"availableReplicas": replicas, "readyReplicas": replicas,
				// What the Deployment controller sets once a rollout is
				// complete, which kstatus reads.
				"conditions": []any{
					map[string]any{"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable"},
					map[string]any{"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable"},
				},
			}, "status"))
		case "Service":
			must(t, unstructured.SetNestedField(c.Object, "10.96.0.10", "spec", "clusterIP"))
		}
	}
	return children
}

// converged returns a parent whose status is what a sync would write after
// its children (also returned) became ready.
func converged(t *testing.T, parent *unstructured.Unstructured) (*unstructured.Unstructured, []*unstructured.Unstructured) {
	t.Helper()
	children := rendered(t, parent)
	st := status.Desired(parent, status.Outcome{Live: children, Extra: map[string]any{"image": parent.Object["spec"].(map[string]any)["image"]}})
	parent = parent.DeepCopy()
	parent.Object["status"] = st
	return parent, children
}

func expectActions(t *testing.T, got []core.Action, want ...string) {
	t.Helper()
	g := describe(got)
	if strings.Join(g, "\n") != strings.Join(want, "\n") {
		t.Errorf("actions:\n  got:  %s\n  want: %s", strings.Join(g, "\n        "), strings.Join(want, "\n        "))
	}
}

func conditionOf(t *testing.T, a core.Action) map[string]any {
	t.Helper()
	var body struct {
		Status struct {
			Conditions []map[string]any `json:"conditions"`
		} `json:"status"`
	}
	must(t, json.Unmarshal(a.(core.PatchAction).GetPatch(), &body))
	for _, c := range body.Status.Conditions {
		if c["type"] == contract.ConditionReady {
			return c
		}
	}
	t.Fatalf("status patch has no Ready condition: %s", a.(core.PatchAction).GetPatch())
	return nil
}

func TestNewResourceCostsOneCreatePerChildAndNoStatusYet(t *testing.T) {
	f := newFixture(t)
	p := webapp("demo", map[string]any{"image": "nginx:1.27", "replicas": int64(2), "port": int64(80)})
	f.cache = append(f.cache, p)
	f.api = append(f.api, p)
	actions, err := f.run("demo")
	if err != nil {
		t.Fatal(err)
	}
	// Without a metadata cache (Options.Metadata, not in this fixture) a
	// cache miss is read first. No status yet: the children cannot be
	// ready, and their events (or the FirstStatusDelay requeue, 1ms here)
	// bring the resource back.
	expectActions(t, actions, "get deployments demo", "patch deployments demo (apply)",
		"get services demo", "patch services demo (apply)")
	var dep *unstructured.Unstructured
	must(t, json.Unmarshal(actions[1].(core.PatchAction).GetPatch(), &dep))
	if ref := metav1.GetControllerOf(dep); ref == nil || ref.UID != "uid-demo" || ref.Kind != "WebApp" {
		t.Errorf("created Deployment has controller ref %+v, want WebApp uid-demo", ref)
	}
	if got := dep.GetLabels()[contract.LabelOwnerUID]; got != "uid-demo" {
		t.Errorf("owner-uid label = %q", got)
	}
	expectEvent(t, f.recorder, "Normal Created Created Deployment/demo, Service/demo")
	deadline := time.Now().Add(5 * time.Second)
	for f.queue.Len() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the new resource was not queued again for its first status")
		}
		time.Sleep(time.Millisecond)
	}
}

func TestConvergedResourceCostsNothing(t *testing.T) {
	f := newFixture(t)
	p, children := converged(t, webapp("demo", map[string]any{"image": "nginx:1.27", "replicas": int64(2), "port": int64(80)}))
	f.cache = append(f.cache, p)
	f.cache = append(f.cache, children...)
	actions, err := f.run("demo")
	if err != nil {
		t.Fatal(err)
	}
	expectActions(t, actions)
}

func TestHandChangedFieldCostsOneApplyOfThatChild(t *testing.T) {
	f := newFixture(t)
	p, children := converged(t, webapp("demo", map[string]any{"image": "nginx:1.27", "replicas": int64(2), "port": int64(80)}))
	// Someone edits the image by hand; the applied hash still matches, and
	// the image field moves to their field manager.
	children[0] = serverUpdate(t, children[0], "kubectl-edit", func(u *unstructured.Unstructured) {
		containers, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
		containers[0].(map[string]any)["image"] = "evil:latest"
		must(t, unstructured.SetNestedSlice(u.Object, containers, "spec", "template", "spec", "containers"))
	})
	f.cache = append(f.cache, p)
	f.cache = append(f.cache, children...)
	actions, err := f.run("demo")
	if err != nil {
		t.Fatal(err)
	}
	expectActions(t, actions, "patch deployments demo (apply)")
}

func TestFieldsTheTemplateDoesNotSetAreLeftAlone(t *testing.T) {
	f := newFixture(t)
	p, children := converged(t, webapp("demo", map[string]any{"image": "nginx:1.27", "replicas": int64(2), "port": int64(80)}))
	// Fields set by others (an annotation, a sidecar's env) cost nothing.
	children[0] = serverUpdate(t, children[0], "someone", func(u *unstructured.Unstructured) {
		u.SetAnnotations(map[string]string{contract.AnnotationAppliedHash: u.GetAnnotations()[contract.AnnotationAppliedHash], "other": "x"})
		must(t, unstructured.SetNestedField(u.Object, "OnFailure", "spec", "template", "spec", "restartPolicy"))
	})
	f.cache = append(f.cache, p)
	f.cache = append(f.cache, children...)
	actions, err := f.run("demo")
	if err != nil {
		t.Fatal(err)
	}
	expectActions(t, actions)
}

func TestNoLongerRenderedChildCostsOneDelete(t *testing.T) {
	f := newFixture(t)
	p, children := converged(t, webapp("demo", map[string]any{"image": "nginx:1.27", "replicas": int64(2), "port": int64(80)}))
	// The spec loses its port: the Service is no longer rendered.
	delete(p.Object["spec"].(map[string]any), "port")
	f.cache = append(f.cache, p)
	f.cache = append(f.cache, children...)
	f.api = append(f.api, children[1])
	actions, err := f.run("demo")
	if err != nil {
		t.Fatal(err)
	}
	expectActions(t, actions, "delete services demo")
	del := actions[0].(core.DeleteAction)
	if uid := del.GetDeleteOptions().Preconditions; uid == nil || *uid.UID != children[1].GetUID() {
		t.Errorf("delete without the child's UID precondition: %+v", del.GetDeleteOptions())
	}
}

func TestForeignObjectOfTheSameNameIsNotTouched(t *testing.T) {
	f := newFixture(t)
	p, children := converged(t, webapp("demo", map[string]any{"image": "nginx:1.27", "replicas": int64(2), "port": int64(80)}))
	// A Service named demo exists, created by someone else: not in stencil's
	// filtered cache, found by the GET.
	foreign := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Service",
		"metadata": map[string]any{"name": "demo", "namespace": "ns", "uid": "foreign"},
		"spec":     map[string]any{"clusterIP": "10.96.0.99"},
	}}
	f.cache = append(f.cache, p, children[0])
	f.api = append(f.api, foreign)
	actions, err := f.run("demo")
	if err != nil {
		t.Fatal(err)
	}
	expectActions(t, actions, "get services demo", "patch webapps/status demo")
	c := conditionOf(t, actions[1])
	if c["reason"] != status.ReasonOwnershipConflict || !strings.Contains(fmt.Sprint(c["message"]), "Service/demo") {
		t.Errorf("Ready condition = %v, want OwnershipConflict naming Service/demo", c)
	}
	expectEvent(t, f.recorder, "Warning OwnershipConflict")
	// No watch reports the foreign object's deletion: the resource is
	// scheduled to be looked at again (ConflictRecheck, 1ms here).
	deadline := time.Now().Add(5 * time.Second)
	for f.queue.Len() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the resource in conflict was not queued for a recheck")
		}
		time.Sleep(time.Millisecond)
	}
}

func TestRenderErrorCostsOneStatusPatchAndNoRetry(t *testing.T) {
	f := newFixture(t)
	p := webapp("demo", map[string]any{"replicas": int64(2)}) // no image
	f.cache = append(f.cache, p)
	actions, err := f.run("demo")
	if err == nil || !requeue.IsTerminal(err) {
		t.Fatalf("err = %v, want a terminal error", err)
	}
	expectActions(t, actions, "patch webapps/status demo")
	c := conditionOf(t, actions[0])
	if c["reason"] != status.ReasonRenderFailed || !strings.Contains(fmt.Sprint(c["message"]), "webapp/deployment.yaml.tmpl:") {
		t.Errorf("Ready condition = %v, want RenderFailed naming the template and line", c)
	}
	// The sync asks for no requeue: the worker drops a terminal error
	// (the controller's handleErr) until the resource changes.
	if after, _ := requeue.Split(err); after != 0 || f.queue.Len() != 0 {
		t.Errorf("after a terminal error: requeue after %s, queue length %d; want none", after, f.queue.Len())
	}
}

func TestRenderErrorAlreadyReportedCostsNothing(t *testing.T) {
	f := newFixture(t)
	p := webapp("demo", map[string]any{"replicas": int64(2)})
	f.cache = append(f.cache, p)
	actions, _ := f.run("demo")
	// Feed the written status back, as the watch would, and sync again.
	var body unstructured.Unstructured
	must(t, body.UnmarshalJSON(withKind(actions[0].(core.PatchAction).GetPatch())))
	p = p.DeepCopy()
	p.Object["status"] = body.Object["status"]
	f2 := newFixture(t)
	f2.cache = append(f2.cache, p)
	actions, err := f2.run("demo")
	if !requeue.IsTerminal(err) {
		t.Fatalf("err = %v, want terminal", err)
	}
	expectActions(t, actions)
	expectNoEvent(t, f2.recorder)
}

func TestConflictAlreadyReportedCostsOneGetAndNoEvent(t *testing.T) {
	foreign := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Service",
		"metadata": map[string]any{"name": "demo", "namespace": "ns", "uid": "foreign"},
	}}
	p, children := converged(t, webapp("demo", map[string]any{"image": "nginx:1.27", "replicas": int64(2), "port": int64(80)}))
	f := newFixture(t)
	f.cache = append(f.cache, p, children[0])
	f.api = append(f.api, foreign)
	actions, _ := f.run("demo")
	expectActions(t, actions, "get services demo", "patch webapps/status demo")
	// The recheck 30s later sees the status it wrote: it looks the name up
	// again, and neither patches status nor repeats the Warning event.
	var body unstructured.Unstructured
	must(t, body.UnmarshalJSON(withKind(actions[1].(core.PatchAction).GetPatch())))
	p = p.DeepCopy()
	mergeInto(p.Object, map[string]any{"status": body.Object["status"]})
	f2 := newFixture(t)
	f2.cache = append(f2.cache, p, children[0])
	f2.api = append(f2.api, foreign)
	actions, err := f2.run("demo")
	if err != nil {
		t.Fatal(err)
	}
	expectActions(t, actions, "get services demo")
	expectNoEvent(t, f2.recorder)
}

func TestPausedResourceIsNotWritten(t *testing.T) {
	f := newFixture(t)
	p := webapp("demo", map[string]any{"image": "nginx:1.27", "replicas": int64(2)})
	p.SetAnnotations(map[string]string{contract.AnnotationPaused: "true"})
	f.cache = append(f.cache, p)
	actions, err := f.run("demo")
	if err != nil {
		t.Fatal(err)
	}
	expectActions(t, actions, "patch webapps/status demo")
	if c := conditionOf(t, actions[0]); c["reason"] != status.ReasonPaused {
		t.Errorf("Ready condition = %v, want Paused", c)
	}
}

func TestDeletedResourceEndsQuietly(t *testing.T) {
	f := newFixture(t)
	actions, err := f.run("gone")
	if err != nil {
		t.Fatal(err)
	}
	expectActions(t, actions)
}

func expectEvent(t *testing.T, r *record.FakeRecorder, prefix string) {
	t.Helper()
	for {
		select {
		case e := <-r.Events:
			if strings.HasPrefix(e, prefix) {
				return
			}
		default:
			t.Errorf("no event starting with %q", prefix)
			return
		}
	}
}

func expectNoEvent(t *testing.T, r *record.FakeRecorder) {
	t.Helper()
	select {
	case e := <-r.Events:
		t.Errorf("unexpected event %q", e)
	default:
	}
}

// mergeInto overlays src onto dst, maps recursively, everything else replaced.
func mergeInto(dst, src map[string]any) {
	for k, v := range src {
		if sm, ok := v.(map[string]any); ok {
			if dm, ok := dst[k].(map[string]any); ok {
				mergeInto(dm, sm)
				continue
			}
		}
		dst[k] = v
	}
}

// withKind adds apiVersion and kind to a patch body so that the unstructured
// decoder, which yields int64 numbers as the API machinery does, accepts it.
func withKind(patch []byte) []byte {
	var m map[string]any
	_ = json.Unmarshal(patch, &m)
	m["apiVersion"], m["kind"] = "apps.example.com/v1beta1", "WebApp"
	out, _ := json.Marshal(m)
	return out
}

func TestStatusFieldTheSchemaPrunesCostsOnePatch(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	f := newFixture(t)
	p, children := converged(t, webapp("demo", map[string]any{"image": "nginx:1.27", "replicas": int64(2), "port": int64(80)}))
	// The CRD's status schema does not list the template's "image": the
	// server stores every status field but that one.
	delete(p.Object["status"].(map[string]any), "image")
	f.cache = append(f.cache, p)
	f.cache = append(f.cache, children...)
	f.newReconciler(ctx)
	stored := p.DeepCopy()
	f.client.PrependReactor("patch", "webapps", func(core.Action) (bool, runtime.Object, error) {
		return true, stored, nil
	})
	key := Key{GVR: webappGVR, NamespacedName: types.NamespacedName{Namespace: "ns", Name: "demo"}}
	for range 3 {
		must(t, f.sync(ctx, key))
	}
	patches := 0
	for _, a := range f.client.Actions() {
		if a.GetVerb() == "patch" && a.GetSubresource() == "status" {
			patches++
		}
	}
	if patches != 1 {
		t.Errorf("3 syncs with a status field the server prunes made %d status patches, want 1", patches)
	}
}

func TestStatusFieldNoLongerRenderedIsRemoved(t *testing.T) {
	f := newFixture(t)
	p, children := converged(t, webapp("demo", map[string]any{"image": "nginx:1.27", "replicas": int64(2), "port": int64(80)}))
	// An earlier status template rendered "url"; stencil's status writes hold it.
	p.Object["status"].(map[string]any)["url"] = "http://old"
	p.SetManagedFields([]metav1.ManagedFieldsEntry{{
		Manager: contract.FieldManager, Operation: metav1.ManagedFieldsOperationUpdate, Subresource: "status", APIVersion: "apps.example.com/v1beta1",
		FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:status":{"f:url":{},"f:image":{},"f:phase":{}}}`)},
	}})
	f.cache = append(f.cache, p)
	f.cache = append(f.cache, children...)
	actions, err := f.run("demo")
	must(t, err)
	expectActions(t, actions, "patch webapps/status demo")
	patch := string(actions[0].(core.PatchAction).GetPatch())
	if !strings.Contains(patch, `"url":null`) || strings.Contains(patch, "phase") {
		t.Errorf("status patch = %s, want only url removed", patch)
	}
}

func TestRejectedStatusPatchIsTerminal(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	f := newFixture(t)
	p := webapp("demo", map[string]any{"image": "nginx:1.27", "replicas": int64(2), "port": int64(80)})
	p, children := converged(t, p)
	delete(p.Object, "status")
	f.cache = append(f.cache, p)
	f.cache = append(f.cache, children...)
	f.newReconciler(ctx)
	f.client.PrependReactor("patch", "webapps", func(core.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewInvalid(webappGVK.GroupKind(), "demo", field.ErrorList{
			field.Invalid(field.NewPath("status", "replicas"), "x", "must be an integer")})
	})
	err := f.sync(ctx, Key{GVR: webappGVR, NamespacedName: types.NamespacedName{Namespace: "ns", Name: "demo"}})
	if !requeue.IsTerminal(err) || !strings.Contains(err.Error(), "status.replicas") {
		t.Fatalf("err = %v, want a terminal error naming status.replicas", err)
	}
	expectEvent(t, f.recorder, "Warning StatusRejected")
}
