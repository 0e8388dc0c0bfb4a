//go:build integration

package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"stencil.dev/stencil/config"
	"stencil.dev/stencil/controller/reconcile"
	"stencil.dev/stencil/templates"
	"stencil.dev/stencil/templates/view"
)

// countingProxy serves the API server on a local plain-HTTP port with the
// admin's credentials, counting the requests, and returns a kubeconfig for
// it: stencil diff runs as its own process, and its requests are counted
// outside it.
func countingProxy(b *testing.B, cfg *rest.Config) (kubeconfig string, requests *atomic.Int64) {
	b.Helper()
	target, err := url.Parse(cfg.Host)
	if err != nil {
		b.Fatal(err)
	}
	rt, err := rest.TransportFor(cfg)
	if err != nil {
		b.Fatal(err)
	}
	requests = &atomic.Int64{}
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.Transport = rt
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		proxy.ServeHTTP(w, r)
	})}
	go func() { _ = srv.Serve(ln) }()
	b.Cleanup(func() { _ = srv.Close() })
	kubeconfig = filepath.Join(b.TempDir(), "kubeconfig")
	doc := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: proxy, cluster: {server: "http://%s"}}]
users: [{name: admin, user: {}}]
contexts: [{name: proxy, context: {cluster: proxy, user: admin}}]
current-context: proxy
`, ln.Addr())
	if err := os.WriteFile(kubeconfig, []byte(doc), 0o600); err != nil {
		b.Fatal(err)
	}
	return kubeconfig, requests
}

// serialDryRuns does, one child at a time, what stencil diff does per
// child (a GET and a forced dry-run apply of the render of the config at path), and
// returns how long it took and how many children it asked about.
func serialDryRuns(ctx context.Context, b *testing.B, dyn dynamic.Interface, path, ns string) (time.Duration, int) {
	b.Helper()
	conf, err := config.Load(path)
	if err != nil {
		b.Fatal(err)
	}
	sets, err := templates.LoadAll(conf, templates.Options{})
	if err != nil {
		b.Fatal(err)
	}
	began := time.Now()
	children := 0
	for i, res := range conf.Resources {
		if res.Resource != "webapps" {
			continue
		}
		list, err := dyn.Resource(res.GVR()).Namespace(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			b.Fatal(err)
		}
		for j := range list.Items {
			obj, err := view.NewObject(&list.Items[j], res.GVR())
			if err != nil {
				b.Fatal(err)
			}
			desired, err := sets[i].Render(obj)
			if err != nil {
				b.Fatal(err)
			}
			for _, want := range desired {
				gvk := want.GroupVersionKind()
				child := deployments
				if gvk.Kind == "Service" {
					child = services
				}
				client := dyn.Resource(child).Namespace(ns)
				if _, err := client.Get(ctx, want.GetName(), metav1.GetOptions{}); err != nil {
					b.Fatal(err)
				}
				if _, err := reconcile.DryRunApply(ctx, client, want); err != nil {
					b.Fatal(err)
				}
				children++
			}
		}
	}
	return time.Since(began), children
}

// BenchmarkDiff: stencil diff of an image change over N converged WebApps
// (STENCIL_BENCH_CRS, default 1000), against the same GETs and dry-run
// applies made one at a time in the same run, with the same client limits
// (QPS 500, burst 1000, so that neither is paced by its rate limiter).
// It prints the time of each, their ratio (the target: at most 2x), and
// stencil diff's requests per resource, counted outside the process.
func BenchmarkDiff(b *testing.B) {
	ctx := context.Background()
	base := restConfig(b)
	base.QPS, base.Burst = 500, 1000
	admin := dynamic.NewForConfigOrDie(restConfig(b))
	installCRDs(ctx, b, admin)
	n := benchCRs(b)
	ns := fmt.Sprintf("bench-diff-%d", time.Now().UnixNano()%1000000)
	newNamespace(ctx, b, admin, ns)
	defer deleteNamespace(ctx, b, admin, ns)
	cnt := &counter{mutating: map[string]int{}}
	r := startWorkers(b, base, cnt, ns, filepath.Join(root, "crds", "stencil.yaml"), 4)
	w := watchReady(ctx, b, admin, ns, n)
	createWebApps(ctx, b, admin, ns, n)
	w.wait(b, "stencil", 30*time.Minute)
	r.settle(b, 0, n)
	r.stop(b)

	const image = `{{ required "spec.image must not be empty" .Spec.image | quote }}`
	changed := copyConfig(b, "webapp/deployment.yaml.tmpl", func(tmpl string) string {
		return strings.Replace(tmpl, image, `"registry.k8s.io/pause:3.9"`, 1)
	})
	kubeconfig, requests := countingProxy(b, base)
	dyn := dynamic.NewForConfigOrDie(base)
	for b.Loop() {
		serial, children := serialDryRuns(ctx, b, dyn, changed, ns)
		requests.Store(0)
		began := time.Now()
		status, out := runDiff(b, changed, ns, "-o", "json", "--kubeconfig", kubeconfig, "--qps", "500", "--burst", "1000")
		took := time.Since(began)
		if status != 1 {
			b.Fatalf("stencil diff exit %d, want 1", status)
		}
		var plan diffJSON
		if err := json.Unmarshal([]byte(out), &plan); err != nil {
			b.Fatal(err)
		}
		if plan.Summary.Update != n {
			b.Fatalf("stencil diff: %d updates, want %d", plan.Summary.Update, n)
		}
		ratio := took.Seconds() / serial.Seconds()
		perCR := float64(requests.Load()) / float64(n)
		b.Logf("%d WebApps, %d children: stencil diff %s (%d updates, %.2f requests per resource), the same GETs and dry runs one at a time %s: %.2fx (target at most 2x)",
			n, children, took.Round(time.Millisecond), plan.Summary.Update, perCR, serial.Round(time.Millisecond), ratio)
		b.ReportMetric(float64(n), "CRs")
		b.ReportMetric(took.Seconds(), "s-diff")
		b.ReportMetric(serial.Seconds(), "s-serial")
		b.ReportMetric(ratio, "x-serial")
		b.ReportMetric(perCR, "requests/CR")
	}
}
