//go:build integration

// Package integration runs stencil's controller in-process against the local
// control plane (test/cluster/up.sh) and counts the requests it makes, through
// a wrapping transport on its rest.Config. KUBECONFIG must point at the plane.
package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	"sigs.k8s.io/yaml"

	"stencil.dev/stencil/controller"
	stencilreload "stencil.dev/stencil/controller/reload"
	"stencil.dev/stencil/renderworker"
)

var (
	crdGVR       = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	webapps      = schema.GroupVersionResource{Group: "apps.example.com", Version: "v1beta1", Resource: "webapps"}
	appstacks    = schema.GroupVersionResource{Group: "stacks.example.com", Version: "v1alpha1", Resource: "appstacks"}
	memcacheds   = schema.GroupVersionResource{Group: "cache.example.com", Version: "v1alpha1", Resource: "memcacheds"}
	deployments  = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
	services     = schema.GroupVersionResource{Version: "v1", Resource: "services"}
	namespaceGVR = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}
)

const root = "../.."

// counter counts the requests that pass through a rest.Config.
// Dry runs (dryRun=All) persist nothing and are counted apart.
type counter struct {
	mu       sync.Mutex
	mutating map[string]int // "METHOD path-kind" -> count
	// lastAt is when each "METHOD path-kind" was last sent.
	lastAt   map[string]time.Time
	byObject map[string]int // "resource/name" -> mutating requests
	reads    atomic.Int64
	dryRuns  atomic.Int64
	// watches counts the watch requests among reads (GETs with
	// watch=true): an informer renews its watch every few minutes.
	watches atomic.Int64
	// onGet, when set before the controller starts, sees each read and
	// its response (a watch's body stays open while it watches).
	onGet func(*http.Request, *http.Response)
}

func (c *counter) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(r *http.Request) (*http.Response, error) {
		switch {
		case r.Method == http.MethodGet || r.Method == http.MethodHead:
			c.reads.Add(1)
			if r.URL.Query().Get("watch") == "true" {
				c.watches.Add(1)
			}
			if c.onGet != nil {
				resp, err := rt.RoundTrip(r)
				if err == nil {
					c.onGet(r, resp)
				}
				return resp, err
			}
		case r.URL.Query().Get("dryRun") != "":
			c.dryRuns.Add(1)
		default:
			c.mu.Lock()
			if c.byObject == nil {
				c.byObject = map[string]int{}
			}
			c.mutating[r.Method+" "+resourceOf(r.URL.Path)]++
			if c.lastAt == nil {
				c.lastAt = map[string]time.Time{}
			}
			c.lastAt[r.Method+" "+resourceOf(r.URL.Path)] = time.Now()
			object := objectOf(r.URL.Path)
			if r.Method == http.MethodPost && r.GetBody != nil {
				// A create names its object in the body.
				if body, err := r.GetBody(); err == nil {
					var m struct {
						Metadata struct{ Name string } `json:"metadata"`
					}
					if json.NewDecoder(body).Decode(&m) == nil && m.Metadata.Name != "" {
						object = resourceOf(r.URL.Path) + "/" + m.Metadata.Name
					}
					body.Close()
				}
			}
			c.byObject[object]++
			c.mu.Unlock()
		}
		return rt.RoundTrip(r)
	})
}

func (c *counter) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.mutating = map[string]int{}
	c.byObject = map[string]int{}
	c.lastAt = nil
	c.reads.Store(0)
	c.dryRuns.Store(0)
	c.watches.Store(0)
}

// lastWrite is when the last of the mutating requests keys names (each
// "METHOD path-kind") was sent; zero when none was.
func (c *counter) lastWrite(keys ...string) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	var last time.Time
	for _, k := range keys {
		if t := c.lastAt[k]; t.After(last) {
			last = t
		}
	}
	return last
}

// writesTo returns the mutating requests to one object, e.g. "deployments/x".
func (c *counter) writesTo(object string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.byObject[object]
}

// objectOf turns /apis/apps/v1/namespaces/x/deployments/y/status into
// "deployments/y".
func objectOf(path string) string {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	for i := 0; i < len(parts); i++ {
		if parts[i] == "namespaces" && i+3 < len(parts) {
			return parts[i+2] + "/" + parts[i+3]
		}
	}
	return path
}

func (c *counter) snapshot() (total int, by map[string]int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	by = map[string]int{}
	for k, v := range c.mutating {
		by[k] = v
		total += v
	}
	return total, by
}

// resourceOf turns /apis/apps/v1/namespaces/x/deployments/y/status into
// "deployments/status", and a cluster-scoped path such as
// /apis/authorization.k8s.io/v1/subjectaccessreviews into
// "subjectaccessreviews".
func resourceOf(path string) string {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	var rest []string
	for i := 0; i < len(parts); i++ {
		if parts[i] == "namespaces" && i+2 < len(parts) {
			rest = parts[i+2:]
			break
		}
	}
	switch {
	case rest != nil:
	case len(parts) >= 3 && parts[0] == "api":
		rest = parts[2:]
	case len(parts) >= 4 && parts[0] == "apis":
		rest = parts[3:]
	default:
		return path
	}
	if len(rest) >= 3 {
		return rest[0] + "/" + rest[2]
	}
	return rest[0]
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func restConfig(t testing.TB) *rest.Config {
	t.Helper()
	path := os.Getenv("KUBECONFIG")
	if path == "" {
		t.Fatal("KUBECONFIG is not set: run through `make integration`, which starts the local control plane")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatal(err)
	}
	cfg.QPS, cfg.Burst = 200, 400
	return cfg
}

// freshCRDs deletes the named CRDs, left by an earlier run of a test that
// --manage-crds creates them for, waits until they are gone, and deletes
// them again when the test ends.
func freshCRDs(ctx context.Context, t testing.TB, admin dynamic.Interface, names ...string) {
	t.Helper()
	for _, name := range names {
		_ = admin.Resource(crdsGVR).Delete(ctx, name, metav1.DeleteOptions{})
		t.Cleanup(func() { _ = admin.Resource(crdsGVR).Delete(context.Background(), name, metav1.DeleteOptions{}) })
	}
	poll(t, time.Minute, fmt.Sprintf("no CRD %v left from an earlier run", names), func() (bool, error) {
		for _, name := range names {
			if _, err := admin.Resource(crdsGVR).Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				return false, nil
			}
		}
		return true, nil
	})
}

// installCRDs applies crds/*-crd.yaml and waits until they are Established.
func installCRDs(ctx context.Context, t testing.TB, dyn dynamic.Interface) {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(root, "crds", "*-crd.yaml"))
	if len(files) == 0 {
		t.Fatal("no crds/*-crd.yaml")
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(data, &u.Object); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if _, err := dyn.Resource(crdGVR).Apply(ctx, u.GetName(), u, metav1.ApplyOptions{FieldManager: "stencil-test", Force: true}); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		poll(t, 60*time.Second, "CRD "+u.GetName()+" Established", func() (bool, error) {
			crd, err := dyn.Resource(crdGVR).Get(ctx, u.GetName(), metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
			for _, c := range conds {
				m := c.(map[string]any)
				if m["type"] == "Established" && m["status"] == "True" {
					return true, nil
				}
			}
			return false, nil
		})
	}
}

func poll(t testing.TB, timeout time.Duration, what string, cond func() (bool, error)) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, timeout, true,
		func(context.Context) (bool, error) { return cond() })
	if err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

// running is one in-process controller.
type running struct {
	c       *controller.Controller
	metrics *controller.Metrics
	cancel  context.CancelFunc
	done    chan error
	// stopped makes stop idempotent: a test may stop a controller early
	// and still defer the stop.
	stopped bool
	// logs holds what the controller logged (startLogged); nil otherwise.
	logs ktesting.Buffer
}

func start(t testing.TB, cfg *rest.Config, cnt *counter, ns string) *running {
	t.Helper()
	return startConfig(t, cfg, cnt, ns, filepath.Join(root, "crds", "stencil.yaml"))
}

// startConfig runs a controller with the config file at path.
func startConfig(t testing.TB, cfg *rest.Config, cnt *counter, ns, path string) *running {
	t.Helper()
	return startWorkers(t, cfg, cnt, ns, path, 4)
}

// startWorkers runs a controller with the config at path and workers workers.
func startWorkers(t testing.TB, cfg *rest.Config, cnt *counter, ns, path string, workers int) *running {
	t.Helper()
	return startWith(t, cfg, cnt, ns, path, func(o *controller.Options) { o.Workers = workers })
}

// startWith runs a controller with the config at path, its options as
// startConfig's changed by edit.
func startWith(t testing.TB, cfg *rest.Config, cnt *counter, ns, path string, edit func(*controller.Options)) *running {
	t.Helper()
	return startSource(t, cfg, cnt, ns, stencilreload.Source{Path: path}, edit, false)
}

// startLogged is startWith; with buffer, what the controller logs is also
// kept in running.logs, for a test to search.
func startLogged(t testing.TB, cfg *rest.Config, cnt *counter, ns, path string, edit func(*controller.Options), buffer bool) *running {
	t.Helper()
	return startSource(t, cfg, cnt, ns, stencilreload.Source{Path: path}, edit, buffer)
}

// startSource is startLogged for any source (a watches file), whose Wall
// it sets.
func startSource(t testing.TB, cfg *rest.Config, cnt *counter, ns string, src stencilreload.Source, edit func(*controller.Options), buffer bool) *running {
	t.Helper()
	logOpts := []ktesting.ConfigOption{ktesting.BufferLogs(buffer)}
	if _, ok := t.(*testing.B); ok {
		// A benchmark measures stencil as it runs by default (-v=0), not
		// with the test logger's verbosity of 5 formatting every step.
		logOpts = append(logOpts, ktesting.Verbosity(0))
	}
	logger := ktesting.NewLogger(t, ktesting.NewConfig(logOpts...))
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), logger))
	// Renders go through the wall, as in stencil run: render workers are
	// this test binary (TestMain serves as one).
	m := controller.NewMetrics()
	wall, err := renderworker.NewPool(renderworker.Options{Size: 16, Logger: klog.FromContext(ctx), Metrics: renderworker.NewMetrics(m.Registry)})
	if err != nil {
		t.Fatal(err)
	}
	src.Wall = wall
	conf, sets, err := src.Load()
	if err != nil {
		t.Fatal(err)
	}
	cfg = rest.CopyConfig(cfg)
	cfg.Wrap(cnt.wrap)
	dyn := dynamic.NewForConfigOrDie(cfg)
	kube := kubernetes.NewForConfigOrDie(cfg)
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(discovery.NewDiscoveryClientForConfigOrDie(cfg)))
	opts := controller.Options{
		Config: conf, Sets: sets, Dynamic: dyn, Metadata: metadata.NewForConfigOrDie(cfg), Kube: kube, Mapper: mapper, Metrics: m,
		Namespace: ns, Workers: 4, ResyncPeriod: time.Hour,
	}
	opts.Wall = wall
	edit(&opts)
	c, err := controller.New(ctx, opts)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	r := &running{c: c, metrics: m, cancel: cancel, done: make(chan error, 1)}
	if u, ok := logger.GetSink().(ktesting.Underlier); ok && buffer {
		r.logs = u.GetBuffer()
	}
	go func() {
		err := c.Run(ctx)
		wall.Close()
		r.done <- err
	}()
	return r
}

func (r *running) stop(t testing.TB) {
	t.Helper()
	if r.stopped {
		return
	}
	r.stopped = true
	r.cancel()
	select {
	case err := <-r.done:
		if err != nil {
			t.Fatalf("controller Run: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("controller did not stop within 30s of cancel")
	}
}

// counterValue sums a counter family in the controller's registry.
func (r *running) counterValue(t testing.TB, name string) float64 {
	t.Helper()
	mfs, err := r.metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if m.GetCounter() != nil {
				sum += m.GetCounter().GetValue()
			}
			if m.GetGauge() != nil {
				sum += m.GetGauge().GetValue()
			}
		}
	}
	return sum
}

// settle waits until the controller has made at least n more reconciles than
// before and its queue is empty.
func (r *running) settle(t testing.TB, before float64, n int) {
	t.Helper()
	// 2 workers reconcile a converged resource in a few milliseconds:
	// 10,000 of them (make bench's full size) take minutes.
	timeout := 2*time.Minute + time.Duration(n)*30*time.Millisecond
	poll(t, timeout, fmt.Sprintf("%d reconciles and an empty queue", n), func() (bool, error) {
		return r.counterValue(t, "stencil_reconcile_total")-before >= float64(n) &&
			r.counterValue(t, "workqueue_depth") == 0 &&
			r.counterValue(t, "workqueue_unfinished_work_seconds") == 0, nil
	})
}

func newNamespace(ctx context.Context, t testing.TB, dyn dynamic.Interface, name string) {
	t.Helper()
	ns := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": name}}}
	if _, err := dyn.Resource(namespaceGVR).Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = dyn.Resource(namespaceGVR).Delete(context.Background(), name, metav1.DeleteOptions{})
	})
}

// createOnce creates obj, a name the test chose in its own fresh namespace,
// and takes AlreadyExists for success, returning the stored object. Under
// load the API server answers a create whose etcd write timed out with
// Retry-After, and client-go sends the POST again although the first one was
// stored: the second answers AlreadyExists for the object the first created.
func createOnce(ctx context.Context, ri dynamic.ResourceInterface, obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	out, err := ri.Create(ctx, obj, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return ri.Get(ctx, obj.GetName(), metav1.GetOptions{})
	}
	return out, err
}

func cr(res schema.GroupVersionResource, kind, ns, name string, spec map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": res.GroupVersion().String(), "kind": kind,
		"metadata": map[string]any{"name": name, "namespace": ns},
		"spec":     spec,
	}}
}

func isReady(u *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	gen := u.GetGeneration()
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == "Ready" && m["status"] == "True" {
			og, _, _ := unstructured.NestedInt64(u.Object, "status", "observedGeneration")
			return og == gen
		}
	}
	return false
}

// TestConvergedClusterCostsZeroWrites measures what a converged cluster costs: 50 CRs over
// both sample CRDs converge, then a forced resync and a restart each make 0
// mutating requests. The WebApps render every child kind of the example
// (Deployment, Service, ConfigMap, PodDisruptionBudget,
// HorizontalPodAutoscaler). Figures are logged for the README.
func TestConvergedClusterCostsZeroWrites(t *testing.T) {
	cfg := restConfig(t)
	ctx := context.Background()
	admin := dynamic.NewForConfigOrDie(cfg)
	installCRDs(ctx, t, admin)
	ns := fmt.Sprintf("it-zero-%d", time.Now().UnixNano()%100000)
	newNamespace(ctx, t, admin, ns)

	cnt := &counter{mutating: map[string]int{}}
	r := start(t, cfg, cnt, ns)
	defer func() { r.stop(t) }()

	const perKind = 25
	for i := range perKind {
		spec := map[string]any{"image": "registry.k8s.io/pause:3.10", "replicas": int64(1), "port": int64(8080)}
		// Every child kind of the example: a third with a ConfigMap and a
		// PodDisruptionBudget, a third with an HPA (which owns replicas).
		switch i % 3 {
		case 1:
			spec["config"] = map[string]any{"LOG_LEVEL": "info", "N": fmt.Sprint(i)}
			spec["minAvailable"] = int64(1)
		case 2:
			delete(spec, "replicas")
			spec["autoscale"] = map[string]any{"maxReplicas": int64(2)}
		}
		w := cr(webapps, "WebApp", ns, fmt.Sprintf("web-%02d", i), spec)
		if _, err := createOnce(ctx, admin.Resource(webapps).Namespace(ns), w); err != nil {
			t.Fatal(err)
		}
		m := cr(memcacheds, "Memcached", ns, fmt.Sprintf("mc-%02d", i), map[string]any{"size": int64(1)})
		if _, err := createOnce(ctx, admin.Resource(memcacheds).Namespace(ns), m); err != nil {
			t.Fatal(err)
		}
	}
	began := time.Now()
	poll(t, 3*time.Minute, "50 CRs Ready=True", func() (bool, error) {
		ready := 0
		for _, res := range []schema.GroupVersionResource{webapps, memcacheds} {
			list, err := admin.Resource(res).Namespace(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, err
			}
			for i := range list.Items {
				if isReady(&list.Items[i]) {
					ready++
				}
			}
		}
		return ready == 2*perKind, nil
	})
	r.settle(t, 0, 2*perKind)
	total, by := cnt.snapshot()
	t.Logf("create: 50 CRs converged in %s with %d mutating requests (%.2f per CR): %v; %d reads (%.2f per CR)",
		time.Since(began).Round(time.Millisecond), total, float64(total)/50, by, cnt.reads.Load(), float64(cnt.reads.Load())/50)

	// Forced resync: every CR reconciled again from the cache.
	cnt.reset()
	before := r.counterValue(t, "stencil_reconcile_total")
	if n := r.c.EnqueueAll(); n != 2*perKind {
		t.Fatalf("EnqueueAll enqueued %d, want %d", n, 2*perKind)
	}
	r.settle(t, before, 2*perKind)
	total, by = cnt.snapshot()
	t.Logf("resync: %d mutating requests (%v), %d reads", total, by, cnt.reads.Load())
	if total != 0 {
		t.Errorf("a forced resync of a converged cluster made %d mutating requests: %v", total, by)
	}

	// Restart: a new process with empty caches.
	r.stop(t)
	cnt.reset()
	r = start(t, cfg, cnt, ns)
	r.settle(t, 0, 2*perKind)
	total, by = cnt.snapshot()
	t.Logf("restart: %d mutating requests (%v), %d reads (list+watch and discovery)", total, by, cnt.reads.Load())
	if total != 0 {
		t.Errorf("a restart over a converged cluster made %d mutating requests: %v", total, by)
	}

	// Deleting a CR garbage-collects its children through ownerReferences.
	if err := admin.Resource(webapps).Namespace(ns).Delete(ctx, "web-00", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	poll(t, 2*time.Minute, "children of web-00 garbage-collected", func() (bool, error) {
		for _, res := range []schema.GroupVersionResource{deployments, services} {
			_, err := admin.Resource(res).Namespace(ns).Get(ctx, "web-00", metav1.GetOptions{})
			if err == nil {
				return false, nil
			}
			if !apierrors.IsNotFound(err) {
				return false, err
			}
		}
		return true, nil
	})
}
