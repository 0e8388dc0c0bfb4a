package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	core "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"

	"stencil.dev/stencil/config"
	"stencil.dev/stencil/controller/registry"
	"stencil.dev/stencil/controller/reload"
	"stencil.dev/stencil/templates"
)

// The plane: the whole controller (Run, informers, workers) on a fake
// dynamic client whose tracker holds the CRDs, the custom resources and the
// children stencil applies; tests wait by polling a condition with a
// deadline. The registry's own behaviour is tested in package registry,
// on the registry alone: here are the tests of the controller's end of
// it (and access_test.go's of the access reviews), which need the workers.

var (
	gizmoGVR     = schema.GroupVersionResource{Group: "toys.example.com", Version: "v1", Resource: "gizmos"}
	configMapGVR = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	configMapGVK = schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
)

// registryConfig is a config whose webapps entry renders a Deployment (and
// a ConfigMap with configMap), plus a gizmos entry with gizmos. Template
// paths are absolute, so the file may live anywhere.
func registryConfig(t *testing.T, configMap, gizmos bool) string {
	t.Helper()
	abs := func(name string) string {
		p, err := filepath.Abs(filepath.Join("reconcile", "testdata", "webapp", name))
		must(t, err)
		return p
	}
	var b strings.Builder
	fmt.Fprintf(&b, "resources:\n  - group: apps.example.com\n    version: v1beta1\n    resource: webapps\n    templates:\n      - %s\n", abs("deployment.yaml.tmpl"))
	if configMap {
		fmt.Fprintf(&b, "      - %s\n", filepath.Join(t.TempDir(), "configmap.yaml.tmpl"))
		b.WriteString("    children:\n      - {apiVersion: apps/v1, kind: Deployment}\n      - {apiVersion: v1, kind: ConfigMap}\n")
	}
	if gizmos {
		fmt.Fprintf(&b, "  - group: toys.example.com\n    version: v1\n    resource: gizmos\n    templates:\n      - %s\n", abs("deployment.yaml.tmpl"))
	}
	return b.String()
}

// writeConfig writes text as a config file in dir, with the ConfigMap
// template it may name, and returns the file's path.
func writeConfig(t *testing.T, dir, text string) string {
	t.Helper()
	for _, line := range strings.Split(text, "\n") {
		if p, ok := strings.CutPrefix(strings.TrimSpace(line), "- "); ok && strings.HasSuffix(p, "configmap.yaml.tmpl") {
			must(t, os.WriteFile(p, []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Name }}-config\ndata:\n  image: {{ .Spec.image }}\n"), 0o600))
		}
	}
	// Written whole, then renamed: the reload loop never reads half a file.
	path := filepath.Join(dir, "stencil.yaml")
	must(t, os.WriteFile(path+".tmp", []byte(text), 0o600))
	must(t, os.Rename(path+".tmp", path))
	return path
}

func loadConfig(t *testing.T, path string) (*config.Config, []*templates.Set) {
	t.Helper()
	cfg, sets, err := reload.Load(path)
	must(t, err)
	return cfg, sets
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

func gizmo(name string) *unstructured.Unstructured {
	u := webapp(name, map[string]any{"replicas": int64(1), "image": "nginx"})
	u.SetAPIVersion("toys.example.com/v1")
	u.SetKind("Gizmo")
	return u
}

// plane is a running controller on a fake API.
type plane struct {
	t       *testing.T
	ctx     context.Context
	client  *dynamicfake.FakeDynamicClient
	metrics *Metrics
	c       *Controller
	rv      atomic.Int64
	// statusPatches: planeOptions.statusPatches.
	statusPatches bool
}

// startPlane runs a controller with the config at path over objs, and
// waits until its workers have started. Run ends when the test does.
func startPlane(t *testing.T, path string, objs ...*unstructured.Unstructured) *plane {
	t.Helper()
	return startPlaneKube(t, path, nil, objs...)
}

// startPlaneKube is startPlane with Options.Kube, for the access reviews
// of a reload.
func startPlaneKube(t *testing.T, path string, kube Kube, objs ...*unstructured.Unstructured) *plane {
	t.Helper()
	return startPlaneWith(t, path, planeOptions{kube: kube}, objs...)
}

// planeOptions are what a test changes of the plane.
type planeOptions struct {
	// kube answers the access reviews of a reload (Options.Kube).
	kube Kube
	// statusPatches makes a status patch change the stored object, as the
	// API server does (resourceVersion precondition, a new
	// resourceVersion, a watch event); without it the object stays as it
	// is and no event comes back.
	statusPatches bool
	// wall, when set, renders every entry (SetWall).
	wall templates.Wall
}

// startPlaneWith is startPlane as o says.
func startPlaneWith(t *testing.T, path string, o planeOptions, objs ...*unstructured.Unstructured) *plane {
	t.Helper()
	logger := ktesting.NewLogger(t, ktesting.NewConfig(ktesting.Verbosity(2)))
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), logger))
	p := &plane{t: t, ctx: ctx, metrics: NewMetrics(), statusPatches: o.statusPatches}
	// The resourceVersions the plane gives start above the objects' own
	// (tests give them 1): a write's must differ from what it replaced.
	p.rv.Store(1000)
	var initial []runtime.Object
	for _, o := range objs {
		initial = append(initial, o)
	}
	p.client = dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		registry.CRDResource: "CustomResourceDefinitionList", webappGVR: "WebAppList", gizmoGVR: "GizmoList",
		deploymentGVR: "DeploymentList", serviceGVR: "ServiceList", configMapGVR: "ConfigMapList",
	}, initial...)
	// Each watch gets its own objects, as from a real API server: the
	// tracker hands a new watch the objects it stores, not copies, and a
	// cache transform (stripChild) then raced the tracker's own reads once
	// two informers watched one resource (a reshard swaps them).
	p.client.PrependWatchReactor("*", func(action core.Action) (bool, watch.Interface, error) {
		var opts metav1.ListOptions
		if wa, ok := action.(core.WatchActionImpl); ok {
			opts = wa.ListOptions
		}
		w, err := p.client.Tracker().Watch(action.GetResource(), action.GetNamespace(), opts)
		if err != nil {
			return true, nil, err
		}
		return true, watch.Filter(w, func(e watch.Event) (watch.Event, bool) {
			if e.Object != nil {
				e.Object = e.Object.DeepCopyObject()
			}
			return e, true
		}), nil
	})
	p.client.PrependReactor("patch", "*", p.apply)

	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, meta.RESTScopeNamespace)
	mapper.Add(schema.GroupVersionKind{Version: "v1", Kind: "Service"}, meta.RESTScopeNamespace)
	mapper.Add(configMapGVK, meta.RESTScopeNamespace)

	cfg, sets := loadConfig(t, path)
	if o.wall != nil {
		for _, s := range sets {
			s.SetWall(o.wall)
		}
	}
	c, err := New(ctx, Options{Config: cfg, Sets: sets, Dynamic: p.client, Mapper: mapper, Metrics: p.metrics,
		Kube: o.kube, Recorder: &record.FakeRecorder{}, Workers: 2, CacheSyncTimeout: 10 * time.Second, FirstStatusDelay: -1})
	must(t, err)
	p.c = c
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	p.eventually("the workers start", c.health.started.Load)
	return p
}

// apply answers server-side applies the way the API server would, writing
// the object to the tracker (so that the informers see it), and status
// patches with the object as it is, or, with statusPatches, patched
// (patchStatus).
func (p *plane) apply(action core.Action) (bool, runtime.Object, error) {
	a, ok := action.(core.PatchActionImpl)
	if !ok {
		return false, nil, nil
	}
	tracker := p.client.Tracker()
	g, ns := a.GetResource(), a.GetNamespace()
	live, err := tracker.Get(g, ns, a.GetName())
	if p.statusPatches && err == nil && a.GetSubresource() == "status" && a.GetPatchType() == types.MergePatchType {
		u, err := p.patchStatus(g, ns, live, a.GetPatch())
		return true, u, err
	}
	if a.GetPatchType() != types.ApplyPatchType {
		return true, live, err
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(a.GetPatch()); err != nil {
		return true, nil, err
	}
	u.SetNamespace(ns)
	if len(a.GetPatchOptions().DryRun) > 0 {
		// What the apply would store: an unchanged render compares equal
		// to the live object (the plane keeps no field owners, so drift
		// asks the dry run).
		if m, merr := meta.Accessor(live); err == nil && merr == nil {
			u.SetUID(m.GetUID())
		}
		return true, u, nil
	}
	u.SetResourceVersion(fmt.Sprint(p.rv.Add(1)))
	if apierrors.IsNotFound(err) {
		u.SetUID(types.UID("uid-" + g.Resource + "-" + a.GetName()))
		return true, u, tracker.Create(g, u, ns)
	}
	if m, merr := meta.Accessor(live); merr == nil {
		u.SetUID(m.GetUID())
	}
	return true, u, tracker.Update(g, u, ns)
}

// patchStatus merge-patches live's status as the API server does: a
// resourceVersion in the patch must be live's (else a conflict), and the
// result is stored under a new one, which its watch event carries.
func (p *plane) patchStatus(g schema.GroupVersionResource, ns string, live runtime.Object, patch []byte) (*unstructured.Unstructured, error) {
	u, ok := live.(*unstructured.Unstructured)
	if !ok {
		return nil, fmt.Errorf("status patch of a %T", live)
	}
	var req struct {
		Metadata struct {
			ResourceVersion string `json:"resourceVersion"`
		} `json:"metadata"`
		Status json.RawMessage `json:"status"`
	}
	if err := json.Unmarshal(patch, &req); err != nil {
		return nil, err
	}
	if rv := req.Metadata.ResourceVersion; rv != "" && rv != u.GetResourceVersion() {
		return nil, apierrors.NewConflict(g.GroupResource(), u.GetName(), fmt.Errorf("patch of resourceVersion %s, stored %s", rv, u.GetResourceVersion()))
	}
	cur := []byte("{}")
	if st, ok := u.Object["status"]; ok && st != nil {
		var err error
		if cur, err = json.Marshal(st); err != nil {
			return nil, err
		}
	}
	merged, err := jsonpatch.MergePatch(cur, req.Status)
	if err != nil {
		return nil, err
	}
	var st map[string]any
	if err := json.Unmarshal(merged, &st); err != nil {
		return nil, err
	}
	out := u.DeepCopy()
	out.Object["status"] = st
	out.SetResourceVersion(fmt.Sprint(p.rv.Add(1)))
	return out, p.client.Tracker().Update(g, out, ns)
}

// eventually polls cond until it holds, or fails the test after a deadline.
func (p *plane) eventually(what string, cond func() bool) {
	p.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			p.t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// watching reports whether an informer has opened a watch on g: objects
// created from then on reach it (the fake API has no resourceVersions to
// resume a watch from).
func (p *plane) watching(g schema.GroupVersionResource) bool {
	for _, a := range p.client.Actions() {
		if a.GetVerb() == "watch" && a.GetResource() == g {
			return true
		}
	}
	return false
}

// applied reports whether stencil applied a child name of resource g.
func (p *plane) applied(g schema.GroupVersionResource, name string) bool {
	for _, a := range p.client.Actions() {
		if pa, ok := a.(core.PatchAction); ok && pa.GetPatchType() == types.ApplyPatchType &&
			a.GetResource() == g && pa.GetName() == name {
			return true
		}
	}
	return false
}

// touched reports whether stencil made any call on resource g but list and watch.
func (p *plane) touched(g schema.GroupVersionResource) bool {
	for _, a := range p.client.Actions() {
		if a.GetResource() == g && a.GetVerb() != "list" && a.GetVerb() != "watch" {
			return true
		}
	}
	return false
}

func (p *plane) create(g schema.GroupVersionResource, u *unstructured.Unstructured) {
	p.t.Helper()
	ns := u.GetNamespace()
	_, err := p.client.Resource(g).Namespace(ns).Create(p.ctx, u, metav1.CreateOptions{})
	must(p.t, err)
}

// gaugeValue reads a gauge's value.
func gaugeValue(t *testing.T, g prometheus.Gauge) float64 {
	t.Helper()
	var m dto.Metric
	must(t, g.Write(&m))
	return m.GetGauge().GetValue()
}

func (p *plane) served(g schema.GroupVersionResource) bool {
	entry := p.c.reg.Parent(g)
	return entry != nil && entry.Served && entry.Running()
}

func (p *plane) servedMetric(label string) float64 {
	return gaugeValue(p.t, p.metrics.served.WithLabelValues(label))
}

// sameChildKinds reports whether a and b hold the same child kind entries.
func sameChildKinds(a, b []*registry.Child) bool {
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

// TestResourceIsReconciledOnceItsCRDAppears: the controller's end of the
// registry's hooks. Served sets stencil_resource_served, and the events of
// the informers the registry starts reach the workers, which apply the
// children.
func TestResourceIsReconciledOnceItsCRDAppears(t *testing.T) {
	path := writeConfig(t, t.TempDir(), registryConfig(t, false, false))
	p := startPlane(t, path, webapp("a", map[string]any{"replicas": int64(1), "image": "nginx"}))
	if got := p.servedMetric("webapps.apps.example.com"); got != 0 {
		t.Fatalf("stencil_resource_served = %v before the CRD exists, want 0", got)
	}

	p.create(registry.CRDResource, crdObject("webapps", "apps.example.com", "WebApp", "v1beta1"))
	p.eventually("the existing WebApp's Deployment is applied", func() bool { return p.applied(deploymentGVR, "a") })
	if got := p.servedMetric("webapps.apps.example.com"); got != 1 {
		t.Errorf("stencil_resource_served = %v, want 1", got)
	}
}

// TestReloadRacingWithWorkers: reloads that add and remove a child kind
// and a resource each time, while workers sync and resyncs enqueue every
// resource; the last config serves, every custom resource of it is
// reconciled, and one created afterwards too. (The registry's side, reloads racing CRD events, is tested
// in package registry.)
func TestReloadRacingWithWorkers(t *testing.T) {
	dir := t.TempDir()
	small := writeConfig(t, dir, registryConfig(t, false, false))
	cfgSmall, setsSmall := loadConfig(t, small)
	cfgBig, setsBig := loadConfig(t, writeConfig(t, t.TempDir(), registryConfig(t, true, true)))

	objs := []*unstructured.Unstructured{crdObject("webapps", "apps.example.com", "WebApp", "v1beta1"), crdObject("gizmos", "toys.example.com", "Gizmo", "v1")}
	for i := range 5 {
		objs = append(objs, webapp(fmt.Sprintf("w%d", i), map[string]any{"replicas": int64(1), "image": "nginx"}), gizmo(fmt.Sprintf("g%d", i)))
	}
	p := startPlane(t, small, objs...)

	var wg sync.WaitGroup
	wg.Go(func() {
		for range 20 {
			p.c.EnqueueAll()
		}
	})
	for i := range 6 {
		cfg, sets := cfgBig, setsBig
		if i%2 == 1 {
			cfg, sets = cfgSmall, setsSmall
		}
		if err := p.c.Reconfigure(p.ctx, cfg, sets); err != nil {
			t.Fatalf("reload %d: %v", i, err)
		}
	}
	wg.Wait()
	// The last reload was to the small config: webapps only, Deployments only.
	p.eventually("the last config serves", func() bool {
		return p.served(webappGVR) && p.c.reg.Parent(gizmoGVR) == nil && p.c.reg.Parent(webappGVR).Set == setsSmall[0]
	})
	for i := range 5 {
		name := fmt.Sprintf("w%d", i)
		p.eventually("WebApp "+name+" is reconciled", func() bool { return p.applied(deploymentGVR, name) })
	}
	// The workers still run, on the watch the reloads kept.
	p.eventually("the WebApp watch is open", func() bool { return p.watching(webappGVR) })
	p.create(webappGVR, webapp("late", map[string]any{"replicas": int64(1), "image": "nginx"}))
	p.eventually("a WebApp created after the reloads is reconciled", func() bool { return p.applied(deploymentGVR, "late") })
}
