//go:build integration

package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/dynamic"
)

// budgetConfig writes the example config with testdata/budget's template
// (three plausible shapes whose work a tenant's number or list decides:
// shards, hosts, members; each only for a WebApp whose spec.config asks
// for it) into a temporary directory and returns its path.
func budgetConfig(b *testing.B) string {
	b.Helper()
	dir := b.TempDir()
	for _, sub := range []string{"webapp", "memcached"} {
		if err := os.CopyFS(filepath.Join(dir, sub), os.DirFS(filepath.Join(root, "crds", sub))); err != nil {
			b.Fatal(err)
		}
	}
	tmpl, err := os.ReadFile(filepath.Join("testdata", "budget", "budget.yaml.tmpl"))
	if err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "webapp", "budget.yaml.tmpl"), tmpl, 0o644); err != nil {
		b.Fatal(err)
	}
	cfg, err := os.ReadFile(filepath.Join(root, "crds", "stencil.yaml"))
	if err != nil {
		b.Fatal(err)
	}
	text := strings.Replace(string(cfg), "      - webapp/configmap.yaml.tmpl\n", "      - webapp/configmap.yaml.tmpl\n      - webapp/budget.yaml.tmpl\n", 1)
	path := filepath.Join(dir, "stencil.yaml")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		b.Fatal(err)
	}
	return path
}

// createHostile creates 5 WebApps whose spec turns the budget template into
// unbounded work: two of each number, one 20,000-host list.
func createHostile(ctx context.Context, b *testing.B, dyn dynamic.Interface, ns string) {
	var hosts strings.Builder
	for i := range 20000 {
		if i > 0 {
			hosts.WriteByte(',')
		}
		fmt.Fprintf(&hosts, "host-%d.example.com", i%19999)
	}
	for name, config := range map[string]map[string]any{
		"hostile-shards":   {"shards": "300000000"},
		"hostile-shards-2": {"shards": "2000000000"},
		"hostile-hosts":    {"hosts": hosts.String()},
		"hostile-width":    {"width": "2000000000"},
		"hostile-width-2":  {"width": "100000000"},
	} {
		obj := cr(webapps, "WebApp", ns, name, map[string]any{"image": "registry.k8s.io/pause:3.10", "replicas": int64(1), "config": config})
		if _, err := createOnce(ctx, dyn.Resource(webapps).Namespace(ns), obj); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRenderBudget measures what 5 hostile resources cost the others:
// the time from the first create to all of 200 good WebApps Ready, with
// the budget template in the config, without and then with 5 hostile
// WebApps created just before them, in the same run, on the same plane,
// with 2 workers; it prints the ratio (target: at most 1.1x) and the
// renders the budget stopped.
func BenchmarkRenderBudget(b *testing.B) {
	base := restConfig(b)
	base.QPS, base.Burst = 100, 150
	ctx := context.Background()
	admin := dynamic.NewForConfigOrDie(restConfig(b))
	installCRDs(ctx, b, admin)
	config := budgetConfig(b)
	const n = 200
	for b.Loop() {
		stamp := time.Now().UnixNano() % 1000000
		ready := map[bool]time.Duration{}
		stopped := map[bool]float64{}
		for _, hostile := range []bool{false, true} {
			ns := fmt.Sprintf("bench-budget-%t-%d", hostile, stamp)
			newNamespace(ctx, b, admin, ns)
			cnt := &counter{mutating: map[string]int{}}
			r := startWorkers(b, base, cnt, ns, config, 2)
			w := watchReady(ctx, b, admin, ns, n)
			began := time.Now()
			if hostile {
				createHostile(ctx, b, admin, ns)
			}
			createWebApps(ctx, b, admin, ns, n)
			ready[hostile] = w.wait(b, fmt.Sprintf("hostile=%t", hostile), 20*time.Minute).Sub(began)
			r.settle(b, 0, n)
			stopped[hostile] = r.counterValue(b, "stencil_render_budget_exceeded_total")
			r.stop(b)
			deleteNamespace(ctx, b, admin, ns)
		}
		ratio := ready[true].Seconds() / ready[false].Seconds()
		b.Logf("%d good WebApps Ready in %s alone, %s beside 5 hostile ones: %.2fx (target: at most 1.1x); renders stopped by the budget: %.0f and %.0f",
			n, ready[false].Round(time.Millisecond), ready[true].Round(time.Millisecond), ratio, stopped[false], stopped[true])
		b.ReportMetric(ready[false].Seconds(), "s-alone")
		b.ReportMetric(ready[true].Seconds(), "s-hostile")
		b.ReportMetric(ratio, "x-alone")
	}
}
