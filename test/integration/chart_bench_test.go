//go:build integration

package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"stencil.dev/stencil/config"
	"stencil.dev/stencil/templates"
	"stencil.dev/stencil/templates/view"
)

var hellos = schema.GroupVersionResource{Group: "charts.example.com", Version: "v1", Resource: "hellos"}

// helloSpec is the spec of every Hello BenchmarkChart creates: the sample's
// (crds/samples/hello.yaml), the chart's defaults for the rest (a
// Deployment, a Service and a ConfigMap).
func helloSpec() map[string]any {
	return map[string]any{"greeting": "hello, world", "replicaCount": int64(1)}
}

// benchChartCRs is the number of Hellos BenchmarkChart creates;
// STENCIL_BENCH_CHART_CRS overrides it.
func benchChartCRs(b *testing.B) int { return positiveEnv(b, "STENCIL_BENCH_CHART_CRS", 300) }

// chartConfig writes a config whose one entry serves hellos with
// crds/charts/hello (the hellos entry of crds/stencil.yaml, the chart
// named by its absolute path) and returns its path.
func chartConfig(b *testing.B) string {
	b.Helper()
	dir, err := filepath.Abs(filepath.Join(root, "crds", "charts", "hello"))
	if err != nil {
		b.Fatal(err)
	}
	path := filepath.Join(b.TempDir(), "stencil.yaml")
	text := fmt.Sprintf("resources:\n  - group: charts.example.com\n    version: v1\n    resource: hellos\n    chart: %s\n", dir)
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		b.Fatal(err)
	}
	return path
}

// sameChildren fails b unless the two configs render the same children for
// a Hello named name in ns with spec: what the benchmark compares is the
// same work. Children are compared as JSON, by kind and name.
func sameChildren(b *testing.B, chartPath, templatesPath, ns, name string, spec map[string]any) {
	b.Helper()
	render := func(path string) map[string]string {
		conf, err := config.Load(path)
		if err != nil {
			b.Fatal(err)
		}
		sets, err := templates.LoadAll(conf, templates.Options{})
		if err != nil {
			b.Fatal(err)
		}
		// Through JSON, as the API server hands the resource back.
		u := cr(hellos, "Hello", ns, name, spec)
		data, err := json.Marshal(u.Object)
		if err != nil {
			b.Fatal(err)
		}
		if err := u.UnmarshalJSON(data); err != nil {
			b.Fatal(err)
		}
		parent, err := view.NewObject(u, hellos)
		if err != nil {
			b.Fatal(err)
		}
		children, err := sets[0].Render(parent)
		if err != nil {
			b.Fatalf("%s: %v", path, err)
		}
		out := map[string]string{}
		for _, c := range children {
			data, err := json.Marshal(c.Object)
			if err != nil {
				b.Fatal(err)
			}
			out[c.GetKind()+"/"+c.GetName()] = string(data)
		}
		return out
	}
	chart, tmpl := render(chartPath), render(templatesPath)
	if len(chart) != 3 {
		b.Fatalf("the chart renders %d children, want 3 (Deployment, Service, ConfigMap): %v", len(chart), chart)
	}
	for k, v := range chart {
		if tmpl[k] != v {
			b.Fatalf("testdata/hello-templates renders %s otherwise than the chart:\nchart:     %s\ntemplates: %s", k, v, tmpl[k])
		}
	}
	if len(tmpl) != len(chart) {
		b.Fatalf("testdata/hello-templates renders %d children, the chart %d", len(tmpl), len(chart))
	}
}

// BenchmarkChart measures chart mode: N Hellos (crds/hello-crd.yaml)
// served by the chart crds/charts/hello (a Deployment, a Service and a
// ConfigMap each) against the same N Hellos served by stencil's own
// templates rendering the same three children for the same spec
// (testdata/hello-templates, checked to render the same objects before
// anything is measured). Both serve the same CRD, one after the other
// (the templates first), each with its own config, controller and
// namespace (deleted before the next starts), with 2 workers and 100 QPS.
// For each it prints the time from the first create to all N Ready, the
// requests per resource by verb and resource through its client (events
// apart), CPU seconds of the test process, and the writes of a forced
// resync and of a restart. Run it with make bench BENCH=Chart
// (STENCIL_BENCH_CHART_CRS sets N, default 300).
func BenchmarkChart(b *testing.B) {
	base := restConfig(b)
	base.QPS, base.Burst = 100, 150
	ctx := context.Background()
	admin := dynamic.NewForConfigOrDie(restConfig(b))
	installCRDs(ctx, b, admin)
	n := benchChartCRs(b)
	chart := chartConfig(b)
	tmpl := filepath.Join("testdata", "hello-templates", "stencil.yaml")
	sameChildren(b, chart, tmpl, "bench", "hello-00000", helloSpec())

	for b.Loop() {
		stamp := time.Now().UnixNano() % 1000000
		var (
			runs []run
			evs  []string // events per resource by verb
		)
		for _, c := range []struct{ name, config string }{{"templates", tmpl}, {"chart", chart}} {
			ns := fmt.Sprintf("bench-%s-%d", c.name, stamp)
			newNamespace(ctx, b, admin, ns)
			cnt := &counter{mutating: map[string]int{}}
			before := measure()
			r := startWorkers(b, base, cnt, ns, c.config, 2)
			w := watchReadyOf(ctx, b, admin, hellos, ns, n)
			began := time.Now()
			createResources(ctx, b, admin, hellos, "Hello", "hello", ns, n, helloSpec())
			ready := w.wait(b, c.name, 20*time.Minute).Sub(began)
			r.settle(b, 0, n)
			after := measure()
			writes, by := cnt.snapshot()
			events := by["POST events"] + by["PATCH events"]
			eventsBy := fmt.Sprintf("POST %.2f, PATCH %.2f", float64(by["POST events"])/float64(n), float64(by["PATCH events"])/float64(n))
			delete(by, "POST events")
			delete(by, "PATCH events")
			rn := run{name: c.name, ready: ready, by: by, writes: writes - events, reads: int(cnt.reads.Load()), events: events,
				heap: kib(after.heap, before.heap, n), cpu: after.cpu - before.cpu}

			cnt.reset()
			reconciles := r.counterValue(b, "stencil_reconcile_total")
			r.c.EnqueueAll()
			r.settle(b, reconciles, n)
			var resyncBy map[string]int
			rn.resync, resyncBy = cnt.snapshot()
			r.stop(b)
			cnt.reset()
			r = startWorkers(b, base, cnt, ns, c.config, 2)
			r.settle(b, 0, n)
			var restartBy map[string]int
			rn.restart, restartBy = cnt.snapshot()
			r.stop(b)
			if rn.resync != 0 || rn.restart != 0 {
				b.Errorf("%s: a converged namespace cost %d writes on a forced resync (%v) and %d on a restart (%v), want 0",
					c.name, rn.resync, resyncBy, rn.restart, restartBy)
			}
			runs = append(runs, rn)
			evs = append(evs, eventsBy)
			deleteNamespace(ctx, b, admin, ns)
		}
		plain, ch := runs[0], runs[1]
		// On stdout: go test keeps only the first 10 lines a benchmark
		// logs unless -v, and the controllers' logs come first.
		for i, r := range runs {
			fmt.Printf("%-9s %d Hellos Ready in %s; %.2f requests per resource (%s), %.2f reads per resource, %.2f events per resource (%s); heap +%.1f KiB per resource; %.1f CPU s; %d writes on a forced resync, %d on a restart\n",
				r.name, n, r.ready.Round(time.Millisecond), float64(r.writes)/float64(n), r.perResource(n),
				float64(r.reads)/float64(n), float64(r.events)/float64(n), evs[i], r.heap, r.cpu.Seconds(), r.resync, r.restart)
		}
		ratio := ch.ready.Seconds() / plain.ready.Seconds()
		var t strings.Builder
		fmt.Fprintf(&t, "\n| %d Hellos | templates | chart |\n|---|---|---|\n", n)
		fmt.Fprintf(&t, "| time to all Ready | %.1f s | %.1f s (%.2fx) |\n", plain.ready.Seconds(), ch.ready.Seconds(), ratio)
		fmt.Fprintf(&t, "| requests per new resource through the rate-limited client | %.2f | %.2f |\n",
			float64(plain.writes)/float64(n), float64(ch.writes)/float64(n))
		fmt.Fprintf(&t, "| reads per resource | %.2f | %.2f |\n", float64(plain.reads)/float64(n), float64(ch.reads)/float64(n))
		fmt.Fprintf(&t, "| events per resource | %.2f (%s) | %.2f (%s) |\n", float64(plain.events)/float64(n), evs[0], float64(ch.events)/float64(n), evs[1])
		fmt.Fprintf(&t, "| writes on a forced resync / on a restart | %d / %d | %d / %d |\n", plain.resync, plain.restart, ch.resync, ch.restart)
		fmt.Fprintf(&t, "| CPU seconds of the test process | %.1f | %.1f |\n", plain.cpu.Seconds(), ch.cpu.Seconds())
		fmt.Print(t.String())
		b.ReportMetric(float64(n), "CRs")
		b.ReportMetric(plain.ready.Seconds(), "s-templates")
		b.ReportMetric(ch.ready.Seconds(), "s-chart")
		b.ReportMetric(ratio, "x-templates")
		b.ReportMetric(float64(plain.writes)/float64(n), "requests/CR-templates")
		b.ReportMetric(float64(ch.writes)/float64(n), "requests/CR-chart")
		b.ReportMetric(float64(plain.restart), "restart-writes-templates")
		b.ReportMetric(float64(ch.restart), "restart-writes-chart")
	}
}
