package controller

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

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
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

	"stencil.dev/stencil/controller/registry"
	"stencil.dev/stencil/controller/reload"
	"stencil.dev/stencil/gvr"
	"stencil.dev/stencil/templates"
)

// The registry's tests run the whole controller (Run, informers, workers)
// on a fake dynamic client whose tracker holds the CRDs, the custom
// resources and the children stencil applies, and wait by polling a
// condition with a deadline.

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

func loadConfig(t *testing.T, path string) (*gvr.Config, []*templates.Set) {
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
	// forbid makes every list and watch of configmaps Forbidden, as for a
	// ServiceAccount without the RBAC for them.
	forbid atomic.Bool
}

// startPlane runs a controller with the config at path over objs, and
// waits until its workers have started. Run ends when the test does.
func startPlane(t *testing.T, path string, forbidConfigMaps bool, objs ...*unstructured.Unstructured) *plane {
	t.Helper()
	return startPlaneKube(t, path, forbidConfigMaps, nil, objs...)
}

// startPlaneKube is startPlane with Options.Kube, for the access reviews
// of a reload.
func startPlaneKube(t *testing.T, path string, forbidConfigMaps bool, kube Kube, objs ...*unstructured.Unstructured) *plane {
	t.Helper()
	logger := ktesting.NewLogger(t, ktesting.NewConfig(ktesting.Verbosity(2)))
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), logger))
	p := &plane{t: t, ctx: ctx, metrics: NewMetrics()}
	p.forbid.Store(forbidConfigMaps)
	var initial []runtime.Object
	for _, o := range objs {
		initial = append(initial, o)
	}
	p.client = dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		registry.CRDResource: "CustomResourceDefinitionList", webappGVR: "WebAppList", gizmoGVR: "GizmoList",
		deploymentGVR: "DeploymentList", serviceGVR: "ServiceList", configMapGVR: "ConfigMapList",
	}, initial...)
	denied := func(action core.Action) (bool, runtime.Object, error) {
		if p.forbid.Load() {
			return true, nil, apierrors.NewForbidden(configMapGVR.GroupResource(), "", fmt.Errorf("stencil may not %s configmaps", action.GetVerb()))
		}
		return false, nil, nil
	}
	// (Prepended first, so that the denial of configmaps below comes
	// before it.) Each watch gets its own objects, as from a real API server: the
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
	p.client.PrependReactor("list", "configmaps", denied)
	p.client.PrependWatchReactor("configmaps", func(action core.Action) (bool, watch.Interface, error) {
		handled, _, err := denied(action)
		return handled, nil, err
	})
	p.client.PrependReactor("patch", "*", p.apply)

	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, meta.RESTScopeNamespace)
	mapper.Add(schema.GroupVersionKind{Version: "v1", Kind: "Service"}, meta.RESTScopeNamespace)
	mapper.Add(configMapGVK, meta.RESTScopeNamespace)

	cfg, sets := loadConfig(t, path)
	c, err := New(ctx, Options{Config: cfg, Sets: sets, Dynamic: p.client, Mapper: mapper, Metrics: p.metrics,
		Kube: kube, Recorder: &record.FakeRecorder{}, Workers: 2, CacheSyncTimeout: 10 * time.Second, FirstStatusDelay: -1})
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
// patches with the object as it is.
func (p *plane) apply(action core.Action) (bool, runtime.Object, error) {
	a, ok := action.(core.PatchActionImpl)
	if !ok {
		return false, nil, nil
	}
	tracker := p.client.Tracker()
	g, ns := a.GetResource(), a.GetNamespace()
	live, err := tracker.Get(g, ns, a.GetName())
	if a.GetPatchType() != types.ApplyPatchType {
		return true, live, err
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(a.GetPatch()); err != nil {
		return true, nil, err
	}
	if len(a.GetPatchOptions().DryRun) > 0 {
		return true, u, nil
	}
	u.SetNamespace(ns)
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
	pk := p.c.reg.Parent(g)
	return pk != nil && pk.Served && pk.Running()
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

func TestRegistryServesResourceOnceItsCRDAppears(t *testing.T) {
	path := writeConfig(t, t.TempDir(), registryConfig(t, false, false))
	p := startPlane(t, path, false, webapp("a", map[string]any{"replicas": int64(1), "image": "nginx"}))
	if p.served(webappGVR) {
		t.Fatal("webapps served before its CRD exists")
	}
	if got := p.servedMetric("webapps.apps.example.com"); got != 0 {
		t.Fatalf("stencil_resource_served = %v before the CRD exists, want 0", got)
	}

	p.create(registry.CRDResource, crdObject("webapps", "apps.example.com", "WebApp", "v1beta1"))
	p.eventually("webapps is served", func() bool { return p.served(webappGVR) })
	if got := p.servedMetric("webapps.apps.example.com"); got != 1 {
		t.Errorf("stencil_resource_served = %v, want 1", got)
	}
	p.eventually("the existing WebApp's Deployment is applied", func() bool { return p.applied(deploymentGVR, "a") })
}

func TestRegistryStopsServingResourceWhoseCRDIsDeletedOthersUndisturbed(t *testing.T) {
	path := writeConfig(t, t.TempDir(), registryConfig(t, false, true))
	p := startPlane(t, path, false,
		crdObject("webapps", "apps.example.com", "WebApp", "v1beta1"), crdObject("gizmos", "toys.example.com", "Gizmo", "v1"),
		webapp("a", map[string]any{"replicas": int64(1), "image": "nginx"}), gizmo("g"))
	p.eventually("both resources are served", func() bool { return p.served(webappGVR) && p.served(gizmoGVR) })
	p.eventually("the Gizmo's Deployment is applied", func() bool { return p.applied(deploymentGVR, "g") })
	webapps := p.c.reg.Parent(webappGVR)

	must(t, p.client.Resource(registry.CRDResource).Delete(p.ctx, "gizmos.toys.example.com", metav1.DeleteOptions{}))
	p.eventually("gizmos is no longer served", func() bool { return !p.served(gizmoGVR) })
	if got := p.servedMetric("gizmos.toys.example.com"); got != 0 {
		t.Errorf("stencil_resource_served{gizmos} = %v, want 0", got)
	}
	if pk := p.c.reg.Parent(gizmoGVR); pk == nil || pk.Running() {
		t.Errorf("gizmos entry = %+v, want kept in the config with its informers stopped", pk)
	}
	if got := p.c.reg.Parent(webappGVR); got.Informers[""] != webapps.Informers[""] || !p.served(webappGVR) {
		t.Errorf("webapps informers replaced or stopped when another CRD went away")
	}
	if got := p.servedMetric("webapps.apps.example.com"); got != 1 {
		t.Errorf("stencil_resource_served{webapps} = %v, want 1", got)
	}
	// The webapps watch still runs: a new WebApp is reconciled.
	p.create(webappGVR, webapp("b", map[string]any{"replicas": int64(1), "image": "nginx"}))
	p.eventually("the new WebApp's Deployment is applied", func() bool { return p.applied(deploymentGVR, "b") })
}

func TestReloadWhoseInformersCannotSyncLeavesTheRunningConfigServing(t *testing.T) {
	dir := t.TempDir()
	path := writeConfig(t, dir, registryConfig(t, false, false))
	p := startPlane(t, path, true, crdObject("webapps", "apps.example.com", "WebApp", "v1beta1"),
		webapp("a", map[string]any{"replicas": int64(1), "image": "nginx"}))
	p.eventually("webapps is served and reconciled", func() bool { return p.served(webappGVR) && p.applied(deploymentGVR, "a") })
	p.eventually("the WebApp watch is open", func() bool { return p.watching(webappGVR) })
	before, kinds := p.c.reg.Parent(webappGVR), p.c.reg.ChildKinds()

	// The reload loop as run wires it, polling fast.
	w := reload.New(path, 10*time.Millisecond, p.c.Reconfigure, p.metrics.ConfigLoaded)
	p.metrics.ConfigLoaded(true, time.Now())
	go w.Run(p.ctx)
	// The config gains a ConfigMap child that stencil may not list.
	writeConfig(t, dir, registryConfig(t, true, false))
	p.eventually("the reload is refused", func() bool { return gaugeValue(p.t, p.metrics.reloadOK) == 0 })

	if got := p.c.reg.Parent(webappGVR); got.Set != before.Set || got.Informers[""] != before.Informers[""] {
		t.Errorf("webapps entry = %+v, want the running one %+v", got, before)
	}
	if !p.served(webappGVR) {
		t.Error("webapps no longer served after a refused reload")
	}
	if ck := p.c.reg.Child(configMapGVK); ck != nil {
		t.Errorf("ConfigMap child kind published by a refused reload: %+v", ck)
	}
	if got := p.c.reg.ChildKinds(); !sameChildKinds(got, kinds) {
		t.Errorf("child kinds after a refused reload = %v, want the running %v", got, kinds)
	}
	if p.c.health.lastWatchError.Load() != 0 {
		t.Error("a refused reload's watch errors marked the running replica unready")
	}
	// The running config keeps working: a new WebApp gets its Deployment,
	// and nothing is written of the ConfigMaps.
	p.create(webappGVR, webapp("b", map[string]any{"replicas": int64(1), "image": "nginx"}))
	p.eventually("the new WebApp's Deployment is applied", func() bool { return p.applied(deploymentGVR, "b") })
	if p.touched(configMapGVR) {
		t.Error("a ConfigMap write was attempted after a refused reload")
	}

	// Once stencil may list ConfigMaps, the next reload takes.
	p.forbid.Store(false)
	writeConfig(t, dir, registryConfig(t, true, false)+"# RBAC granted\n")
	p.eventually("the reload is applied", func() bool { return gaugeValue(p.t, p.metrics.reloadOK) == 1 })
	p.eventually("the ConfigMaps are applied", func() bool { return p.applied(configMapGVR, "a-config") && p.applied(configMapGVR, "b-config") })
}

func TestReloadRacingWithWorkers(t *testing.T) {
	dir := t.TempDir()
	// Two configs: with and without ConfigMaps and gizmos, so that every
	// reload adds or removes a child kind and a resource.
	small := writeConfig(t, dir, registryConfig(t, false, false))
	cfgs := [2][2]any{}
	cfgSmall, setsSmall := loadConfig(t, small)
	big := writeConfig(t, t.TempDir(), registryConfig(t, true, true))
	cfgBig, setsBig := loadConfig(t, big)
	cfgs[0] = [2]any{cfgSmall, setsSmall}
	cfgs[1] = [2]any{cfgBig, setsBig}

	objs := []*unstructured.Unstructured{crdObject("webapps", "apps.example.com", "WebApp", "v1beta1"), crdObject("gizmos", "toys.example.com", "Gizmo", "v1")}
	for i := range 20 {
		objs = append(objs, webapp(fmt.Sprintf("w%d", i), map[string]any{"replicas": int64(1), "image": "nginx"}), gizmo(fmt.Sprintf("g%d", i)))
	}
	p := startPlane(t, small, false, objs...)

	var wg sync.WaitGroup
	for range 2 {
		// Resyncs and CRD events race the reloads too.
		wg.Go(func() {
			for range 20 {
				p.c.EnqueueAll()
				p.c.reg.Refresh(p.ctx)
			}
		})
	}
	for i := range 10 {
		cfg := cfgs[(i+1)%2]
		if err := p.c.Reconfigure(p.ctx, cfg[0].(*gvr.Config), cfg[1].([]*templates.Set)); err != nil {
			t.Fatalf("reload %d: %v", i, err)
		}
	}
	wg.Wait()
	// The last reload was to the small config: webapps only, Deployments only.
	p.eventually("the last config serves", func() bool {
		return p.served(webappGVR) && p.c.reg.Parent(gizmoGVR) == nil && p.c.reg.Parent(webappGVR).Set == setsSmall[0]
	})
	for i := range 20 {
		name := fmt.Sprintf("w%d", i)
		p.eventually("WebApp "+name+" is reconciled", func() bool { return p.applied(deploymentGVR, name) })
	}
}

func TestClusterScopedChildKindIsRefusedOnceAndAReloadAddingOneIsRefused(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, meta.RESTScopeNamespace)
	mapper.Add(schema.GroupVersionKind{Version: "v1", Kind: "Service"}, meta.RESTScopeNamespace)
	// A ConfigMap that the mapper says is cluster-scoped stands in for any
	// cluster-scoped kind.
	mapper.Add(configMapGVK, meta.RESTScopeRoot)
	client := dynamicfake.NewSimpleDynamicClient(runtime.NewScheme())
	cfg, sets := loadConfig(t, writeConfig(t, t.TempDir(), registryConfig(t, true, false)))
	c, err := New(ctx, Options{Config: cfg, Sets: sets, Dynamic: client, Mapper: mapper, Recorder: &record.FakeRecorder{}})
	must(t, err)
	if !c.reg.RefusedKinds()[configMapGVK] || c.reg.WaitingKinds()[configMapGVK] || c.reg.Child(configMapGVK) != nil {
		t.Fatalf("ConfigMap: refused %v, waiting %v, child %v; want refused only",
			c.reg.RefusedKinds()[configMapGVK], c.reg.WaitingKinds()[configMapGVK], c.reg.Child(configMapGVK))
	}
	// Refused kinds are not looked up again on CRD events.
	c.reg.ResolveWaiting(ctx)
	if !c.reg.RefusedKinds()[configMapGVK] || c.reg.Child(configMapGVK) != nil {
		t.Error("a refused child kind was looked up again")
	}

	// A running config without it: a reload that adds it is refused.
	small, smallSets := loadConfig(t, writeConfig(t, t.TempDir(), registryConfig(t, false, false)))
	c2, err := New(ctx, Options{Config: small, Sets: smallSets, Dynamic: client, Mapper: mapper, Recorder: &record.FakeRecorder{}})
	must(t, err)
	before := c2.reg.Parent(webappGVR)
	err = c2.Reconfigure(ctx, cfg, sets)
	if err == nil || !strings.Contains(err.Error(), "ConfigMap") || !strings.Contains(err.Error(), "cluster-scoped") {
		t.Fatalf("Reconfigure = %v, want an error naming the cluster-scoped ConfigMap", err)
	}
	if c2.reg.Parent(webappGVR) != before || c2.reg.RefusedKinds()[configMapGVK] {
		t.Error("a refused reload changed the registry")
	}
}

func TestReconfigureWithoutConfigIsAnError(t *testing.T) {
	c := &Controller{}
	if err := c.Reconfigure(context.Background(), nil, nil); err == nil {
		t.Fatal("Reconfigure(nil) = nil, want an error")
	}
}

func TestReloadAddingABuiltinResourcePublishesItsKind(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, meta.RESTScopeNamespace)
	mapper.Add(schema.GroupVersionKind{Version: "v1", Kind: "Service"}, meta.RESTScopeNamespace)
	mapper.Add(configMapGVK, meta.RESTScopeNamespace)
	client := dynamicfake.NewSimpleDynamicClient(runtime.NewScheme())
	dir := t.TempDir()
	cfg, sets := loadConfig(t, writeConfig(t, dir, registryConfig(t, false, false)))
	c, err := New(ctx, Options{Config: cfg, Sets: sets, Dynamic: client, Mapper: mapper, Recorder: &record.FakeRecorder{}})
	must(t, err)
	deployment, err := filepath.Abs(filepath.Join("reconcile", "testdata", "webapp", "deployment.yaml.tmpl"))
	must(t, err)
	// ConfigMaps as parents: served by the API server itself, no CRD.
	text := registryConfig(t, false, false) + "  - group: \"\"\n    version: v1\n    resource: configmaps\n    templates: [" + deployment + "]\n"
	next, nextSets := loadConfig(t, writeConfig(t, dir, text))
	must(t, c.Reconfigure(ctx, next, nextSets))
	if pk := c.reg.Parent(configMapGVR); pk == nil || !pk.Served {
		t.Fatalf("configmaps entry = %+v, want served", pk)
	}
	if g, ok := c.reg.ServedBy(configMapGVK.GroupKind()); !ok || g != configMapGVR {
		t.Errorf("byKind[ConfigMap] = %v, %v; want %v (owner references resolve to it)", g, ok, configMapGVR)
	}
}

// TestRegistryStopsServingResourceWhoseCRDStopsServingItsVersion: the
// Gizmo CRD stops serving the configured v1 (v2 only): gizmos stops, webapps
// is undisturbed; v1 served again, a Gizmo created meanwhile is reconciled.
func TestRegistryStopsServingResourceWhoseCRDStopsServingItsVersion(t *testing.T) {
	path := writeConfig(t, t.TempDir(), registryConfig(t, false, true))
	p := startPlane(t, path, false,
		crdObject("webapps", "apps.example.com", "WebApp", "v1beta1"), crdObject("gizmos", "toys.example.com", "Gizmo", "v1"),
		webapp("a", map[string]any{"replicas": int64(1), "image": "nginx"}), gizmo("g"))
	p.eventually("both resources are served", func() bool { return p.served(webappGVR) && p.served(gizmoGVR) })
	webapps := p.c.reg.Parent(webappGVR)

	serve := func(versions ...any) {
		t.Helper()
		crd, err := p.client.Resource(registry.CRDResource).Get(p.ctx, "gizmos.toys.example.com", metav1.GetOptions{})
		must(t, err)
		must(t, unstructured.SetNestedSlice(crd.Object, versions, "spec", "versions"))
		crd.SetResourceVersion(fmt.Sprint(p.rv.Add(1)))
		_, err = p.client.Resource(registry.CRDResource).Update(p.ctx, crd, metav1.UpdateOptions{})
		must(t, err)
	}
	serve(map[string]any{"name": "v1", "served": false}, map[string]any{"name": "v2", "served": true})
	p.eventually("gizmos is no longer served", func() bool { return !p.served(gizmoGVR) })
	if got := p.servedMetric("gizmos.toys.example.com"); got != 0 {
		t.Errorf("stencil_resource_served{gizmos} = %v, want 0", got)
	}
	if got := p.c.reg.Parent(webappGVR); got.Informers[""] != webapps.Informers[""] || !p.served(webappGVR) {
		t.Errorf("webapps informers replaced or stopped when another CRD stopped serving a version")
	}

	watches := func() int {
		n := 0
		for _, a := range p.client.Actions() {
			if a.GetVerb() == "watch" && a.GetResource() == gizmoGVR {
				n++
			}
		}
		return n
	}
	before := watches()
	serve(map[string]any{"name": "v1", "served": true}, map[string]any{"name": "v2", "served": true})
	p.eventually("gizmos is served again, with a new watch", func() bool { return p.served(gizmoGVR) && watches() > before })
	p.create(gizmoGVR, gizmo("h"))
	p.eventually("the new Gizmo's Deployment is applied", func() bool { return p.applied(deploymentGVR, "h") })
}

// TestRegistryReshardKeepsOnlyTheShare: a ring member's informers hold
// only its share's custom resources and children (the fake API, like a
// server without sharded list and watch, ignores the shard selector: the
// registry filters the streams itself), and a new share swaps every
// informer for one of that share.
func TestRegistryReshardKeepsOnlyTheShare(t *testing.T) {
	path := writeConfig(t, t.TempDir(), registryConfig(t, false, false))
	east, west := webapp("e", map[string]any{"replicas": int64(1), "image": "nginx"}), webapp("w", map[string]any{"replicas": int64(1), "image": "nginx"})
	east.SetNamespace("east")
	west.SetNamespace("west")
	p := startPlane(t, path, false, crdObject("webapps", "apps.example.com", "WebApp", "v1beta1"), east, west)
	p.eventually("both WebApps' Deployments are applied", func() bool { return p.applied(deploymentGVR, "e") && p.applied(deploymentGVR, "w") })

	cached := func() (parents, children []string) {
		for _, k := range p.c.reg.Keys(webappGVR) {
			parents = append(parents, k.Namespace)
		}
		for _, inf := range p.c.reg.Child(schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}).Informers {
			for _, obj := range inf.GetStore().List() {
				children = append(children, obj.(metav1.Object).GetNamespace())
			}
		}
		slices.Sort(parents)
		slices.Sort(children)
		return parents, children
	}
	for _, share := range []string{"east", "west"} {
		must(t, p.c.reg.Reshard(p.ctx, &registry.Shard{Holds: func(ns string) bool { return ns == share }}))
		parents, children := cached()
		if !slices.Equal(parents, []string{share}) || !slices.Equal(children, []string{share}) {
			t.Fatalf("share %s: cached WebApps in %v, Deployments in %v; want only %s", share, parents, children, share)
		}
	}
	must(t, p.c.reg.Reshard(p.ctx, &registry.Shard{Holds: func(string) bool { return true }}))
	if parents, children := cached(); len(parents) != 2 || len(children) != 2 {
		t.Fatalf("whole share: cached WebApps in %v, Deployments in %v; want both", parents, children)
	}
}
