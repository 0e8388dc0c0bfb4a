package registry

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	core "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2/ktesting"

	"stencil.dev/stencil/config"
	"stencil.dev/stencil/templates"
)

// The registry's tests drive a Registry the way the controller does (New,
// Start, Refresh once the CRD cache has synced, Reconfigure, Reshard) on a
// fake dynamic client whose tracker holds the CRDs, the custom resources
// and the children. Hooks record what the registry tells its user; the
// tests wait by polling a condition with a deadline.

var (
	webappGVR     = schema.GroupVersionResource{Group: "apps.example.com", Version: "v1beta1", Resource: "webapps"}
	gizmoGVR      = schema.GroupVersionResource{Group: "toys.example.com", Version: "v1", Resource: "gizmos"}
	deploymentGVR = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
	deploymentGVK = schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}
	serviceGVR    = schema.GroupVersionResource{Version: "v1", Resource: "services"}
	configMapGVR  = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	configMapGVK  = schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
)

// entries picks the entries of testConfig beyond webapps, which renders a
// Deployment.
type entries struct {
	// configMapChild: webapps renders a ConfigMap too.
	configMapChild bool
	// gizmos: a gizmos entry, served by its own CRD.
	gizmos bool
	// configMapParent: ConfigMaps as configured resources, served by the
	// API server itself.
	configMapParent bool
}

// testConfig writes a config with its templates to a new directory and
// loads it, as a reload does.
func testConfig(t *testing.T, e entries) (*config.Config, []*templates.Set) {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{
		"deployment.yaml.tmpl": "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {{ .Name }}\nspec:\n  replicas: 1\n",
		"configmap.yaml.tmpl":  "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Name }}-config\ndata:\n  name: {{ .Name }}\n",
	}
	var b strings.Builder
	b.WriteString("resources:\n  - group: apps.example.com\n    version: v1beta1\n    resource: webapps\n")
	if e.configMapChild {
		b.WriteString("    templates: [deployment.yaml.tmpl, configmap.yaml.tmpl]\n")
		b.WriteString("    children:\n      - {apiVersion: apps/v1, kind: Deployment}\n      - {apiVersion: v1, kind: ConfigMap}\n")
	} else {
		b.WriteString("    templates: [deployment.yaml.tmpl]\n")
	}
	if e.gizmos {
		b.WriteString("  - group: toys.example.com\n    version: v1\n    resource: gizmos\n    templates: [deployment.yaml.tmpl]\n")
	}
	if e.configMapParent {
		b.WriteString("  - group: \"\"\n    version: v1\n    resource: configmaps\n    templates: [deployment.yaml.tmpl]\n")
	}
	files["stencil.yaml"] = b.String()
	for name, text := range files {
		must(t, os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600))
	}
	cfg, err := config.Load(filepath.Join(dir, "stencil.yaml"))
	must(t, err)
	sets, err := templates.LoadAll(cfg, templates.Options{})
	must(t, err)
	return cfg, sets
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func crdObject(plural, group, kind, version string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": plural + "." + group, "resourceVersion": "1"},
		"spec": map[string]any{"names": map[string]any{"kind": kind},
			"versions": []any{map[string]any{"name": version, "served": true}}},
		"status": map[string]any{"conditions": []any{map[string]any{"type": "Established", "status": "True"}}},
	}}
}

func webapp(ns, name string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apps.example.com/v1beta1", "kind": "WebApp",
		"metadata": map[string]any{"name": name, "namespace": ns, "uid": "uid-" + name, "resourceVersion": "1"},
	}}
}

func gizmo(ns, name string) *unstructured.Unstructured {
	u := webapp(ns, name)
	u.SetAPIVersion("toys.example.com/v1")
	u.SetKind("Gizmo")
	return u
}

// fakeAPI is the API server of the tests: a tracker that hands each watch
// copies of its objects, as a real server does, and that refuses every
// list and watch of ConfigMaps while forbid is set, as for a
// ServiceAccount without the RBAC for them.
type fakeAPI struct {
	*dynamicfake.FakeDynamicClient
	forbid atomic.Bool
	rv     atomic.Int64

	mu sync.Mutex
	// watches counts the watches opened, by resource: objects created from
	// then on reach the informer (the fake has no resourceVersions to
	// resume a watch from).
	watches map[schema.GroupVersionResource]int
}

func newFakeAPI(objs ...*unstructured.Unstructured) *fakeAPI {
	var initial []runtime.Object
	for _, o := range objs {
		initial = append(initial, o)
	}
	api := &fakeAPI{watches: map[schema.GroupVersionResource]int{}}
	api.FakeDynamicClient = dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		CRDResource: "CustomResourceDefinitionList", webappGVR: "WebAppList", gizmoGVR: "GizmoList",
		deploymentGVR: "DeploymentList", serviceGVR: "ServiceList", configMapGVR: "ConfigMapList",
	}, initial...)
	denied := func(action core.Action) (bool, runtime.Object, error) {
		if api.forbid.Load() && action.GetResource() == configMapGVR {
			return true, nil, apierrors.NewForbidden(configMapGVR.GroupResource(), "", fmt.Errorf("stencil may not %s configmaps", action.GetVerb()))
		}
		return false, nil, nil
	}
	api.PrependWatchReactor("*", func(action core.Action) (bool, watch.Interface, error) {
		if handled, _, err := denied(action); handled {
			return true, nil, err
		}
		var opts metav1.ListOptions
		if wa, ok := action.(core.WatchActionImpl); ok {
			opts = wa.ListOptions
		}
		w, err := api.Tracker().Watch(action.GetResource(), action.GetNamespace(), opts)
		if err != nil {
			return true, nil, err
		}
		api.mu.Lock()
		api.watches[action.GetResource()]++
		api.mu.Unlock()
		return true, watch.Filter(w, func(e watch.Event) (watch.Event, bool) {
			if e.Object != nil {
				e.Object = e.Object.DeepCopyObject()
			}
			return e, true
		}), nil
	})
	api.PrependReactor("list", "configmaps", denied)
	return api
}

// watching returns how many watches of g were opened.
func (api *fakeAPI) watching(g schema.GroupVersionResource) int {
	api.mu.Lock()
	defer api.mu.Unlock()
	return api.watches[g]
}

// recorder is Hooks that record what the registry tells its user.
type recorder struct {
	mu sync.Mutex
	// added counts the adds the parent handlers were told of, by resource
	// and ns/name.
	added map[schema.GroupVersionResource]map[string]int
	// served is the last Served of each entry, by label.
	served map[string]bool
	// removed lists the labels of the entries a reload removed.
	removed     []string
	watchFailed int
}

func (rec *recorder) hooks() Hooks {
	return Hooks{
		ParentHandler: func(g schema.GroupVersionResource) cache.ResourceEventHandler {
			return cache.ResourceEventHandlerFuncs{AddFunc: func(obj any) {
				m, err := meta.Accessor(obj)
				if err != nil {
					return
				}
				rec.mu.Lock()
				defer rec.mu.Unlock()
				if rec.added[g] == nil {
					rec.added[g] = map[string]int{}
				}
				rec.added[g][m.GetNamespace()+"/"+m.GetName()]++
			}}
		},
		Served: func(entry *Parent) {
			rec.mu.Lock()
			defer rec.mu.Unlock()
			rec.served[entry.Label] = entry.Served
		},
		Removed: func(entry *Parent) {
			rec.mu.Lock()
			defer rec.mu.Unlock()
			rec.removed = append(rec.removed, entry.Label)
		},
		WatchFailed: func(time.Time) {
			rec.mu.Lock()
			defer rec.mu.Unlock()
			rec.watchFailed++
		},
	}
}

// told reports whether a parent handler of g was told that ns/name was added.
func (rec *recorder) told(g schema.GroupVersionResource, key string) bool {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return rec.added[g][key] > 0
}

// servedAs returns the last Served of the entry label, and whether there was one.
func (rec *recorder) servedAs(label string) (served, told bool) {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	served, told = rec.served[label]
	return served, told
}

// failures returns how often WatchFailed was told of a watch failure.
func (rec *recorder) failures() int {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return rec.watchFailed
}

// removedLabels returns the labels of the entries Removed was told of.
func (rec *recorder) removedLabels() []string {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return slices.Clone(rec.removed)
}

// harness is a Registry on a fake API, with the hooks of a recorder.
type harness struct {
	t      *testing.T
	ctx    context.Context
	api    *fakeAPI
	mapper *meta.DefaultRESTMapper
	rec    *recorder
	reg    *Registry
}

// newHarness sets up the fake API over objs and a mapper that knows the
// child kinds; build makes the registry.
func newHarness(t *testing.T, objs ...*unstructured.Unstructured) *harness {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(deploymentGVK, meta.RESTScopeNamespace)
	mapper.Add(schema.GroupVersionKind{Version: "v1", Kind: "Service"}, meta.RESTScopeNamespace)
	mapper.Add(configMapGVK, meta.RESTScopeNamespace)
	return &harness{t: t, ctx: ctx, api: newFakeAPI(objs...), mapper: mapper,
		rec: &recorder{added: map[schema.GroupVersionResource]map[string]int{}, served: map[string]bool{}}}
}

// build makes the registry for cfg; its informers do not run yet.
func (h *harness) build(cfg *config.Config, sets []*templates.Set) {
	h.t.Helper()
	reg, err := New(h.ctx, Options{Dynamic: h.api, Mapper: h.mapper, CacheSyncTimeout: 10 * time.Second, Hooks: h.rec.hooks()}, cfg, sets)
	must(h.t, err)
	h.reg = reg
}

// start runs the informers as the controller's runWorkers does: the CRD
// and child informers, then, once the CRDs are known, the served
// resources', and waits for every cache. They stop when the test ends.
func (h *harness) start() {
	h.t.Helper()
	h.reg.Start(h.ctx)
	h.eventually("the CRD and child caches sync", h.reg.Synced)
	h.reg.Refresh(h.ctx)
	h.eventually("every cache syncs", h.reg.Synced)
}

// startRegistry is newHarness, build and start.
func startRegistry(t *testing.T, cfg *config.Config, sets []*templates.Set, objs ...*unstructured.Unstructured) *harness {
	t.Helper()
	h := newHarness(t, objs...)
	h.build(cfg, sets)
	h.start()
	return h
}

// eventually polls cond until it holds, or fails the test after a deadline.
func (h *harness) eventually(what string, cond func() bool) {
	h.t.Helper()
	if err := wait.PollUntilContextTimeout(h.ctx, 10*time.Millisecond, 20*time.Second, true,
		func(context.Context) (bool, error) { return cond(), nil }); err != nil {
		h.t.Fatalf("timed out waiting until %s: %v", what, err)
	}
}

func (h *harness) create(g schema.GroupVersionResource, u *unstructured.Unstructured) {
	h.t.Helper()
	_, err := h.api.Resource(g).Namespace(u.GetNamespace()).Create(h.ctx, u, metav1.CreateOptions{})
	must(h.t, err)
}

// served reports whether g is served and its informers run.
func (h *harness) served(g schema.GroupVersionResource) bool {
	entry := h.reg.Parent(g)
	return entry != nil && entry.Served && entry.Running()
}

// servedBy returns the entry that owner references of kind gk resolve to.
func (r *Registry) servedBy(gk schema.GroupKind) (schema.GroupVersionResource, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	g, ok := r.byKind[gk]
	return g, ok
}

// kindState reports whether child kind k is waiting to be served, and
// whether it was refused as cluster-scoped.
func (r *Registry) kindState(k schema.GroupVersionKind) (waiting, refused bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.waitingKinds[k], r.refusedKinds[k]
}

// sameChildKinds reports whether a and b hold the same child kind entries.
func sameChildKinds(a, b []*Child) bool {
	if len(a) != len(b) {
		return false
	}
	for _, x := range a {
		found := false
		for _, y := range b {
			found = found || x == y
		}
		if !found {
			return false
		}
	}
	return true
}
