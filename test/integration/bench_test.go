//go:build integration

package integration

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
)

// benchCRs is the number of custom resources BenchmarkConverge creates;
// STENCIL_BENCH_CRS overrides it (the plane is sized for 10000).
func benchCRs(b *testing.B) int {
	n := 500
	if v := os.Getenv("STENCIL_BENCH_CRS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n <= 0 {
			b.Fatalf("STENCIL_BENCH_CRS=%q: want a positive integer", v)
		}
	}
	return n
}

// createAll creates n WebApps (half) and Memcacheds (half) in ns, with 8
// parallel clients, and returns how long it took.
func createAll(ctx context.Context, b *testing.B, dyn dynamic.Interface, ns, prefix string, n int) time.Duration {
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	sem := make(chan struct{}, 8)
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			res, obj := webapps, cr(webapps, "WebApp", ns, fmt.Sprintf("%s-web-%05d", prefix, i),
				map[string]any{"image": "registry.k8s.io/pause:3.10", "replicas": int64(1), "port": int64(8080)})
			if i%2 == 1 {
				res, obj = memcacheds, cr(memcacheds, "Memcached", ns, fmt.Sprintf("%s-mc-%05d", prefix, i), map[string]any{"size": int64(1)})
			}
			if _, err := dyn.Resource(res).Namespace(ns).Create(ctx, obj, metav1.CreateOptions{}); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	return time.Since(start)
}

func countReady(ctx context.Context, dyn dynamic.Interface, ns string) (int, error) {
	ready := 0
	for _, res := range []schema.GroupVersionResource{webapps, memcacheds} {
		list, err := dyn.Resource(res).Namespace(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return 0, err
		}
		for i := range list.Items {
			if isReady(&list.Items[i]) {
				ready++
			}
		}
	}
	return ready, nil
}

// BenchmarkConverge measures, on the local plane, how long stencil takes to
// bring N new custom resources to Ready=True, the writes it spends per CR,
// and its heap afterwards. The baseline, measured in the same run, is the
// time the API server alone takes to accept the same N creates: what is left
// is the controller plus the Deployment controller, scheduler and kwok.
// Run it with: make bench (STENCIL_BENCH_CRS=10000 for the full size).
func BenchmarkConverge(b *testing.B) {
	cfg := restConfig(b)
	ctx := context.Background()
	admin := dynamic.NewForConfigOrDie(cfg)
	installCRDs(ctx, b, admin)
	n := benchCRs(b)

	for b.Loop() {
		ns := fmt.Sprintf("bench-%d", time.Now().UnixNano()%1000000)
		newNamespace(ctx, b, admin, ns)

		// Baseline: the API server alone, no controller running.
		baseNS := ns + "-base"
		newNamespace(ctx, b, admin, baseNS)
		baseline := createAll(ctx, b, admin, baseNS, "base", n)

		cnt := &counter{mutating: map[string]int{}}
		var before runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		r := start(b, cfg, cnt, ns)
		created := createAll(ctx, b, admin, ns, "app", n)
		began := time.Now().Add(-created)
		poll(b, 30*time.Minute, fmt.Sprintf("%d CRs Ready=True", n), func() (bool, error) {
			ready, err := countReady(ctx, admin, ns)
			return ready == n, err
		})
		converge := time.Since(began)
		r.settle(b, 0, n)
		writes, _ := cnt.snapshot()
		var after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&after)

		// A resync of the converged set, timed: the steady-state cost.
		cnt.reset()
		reconciles := r.counterValue(b, "stencil_reconcile_total")
		resyncStart := time.Now()
		r.c.EnqueueAll()
		r.settle(b, reconciles, n)
		resync := time.Since(resyncStart)
		resyncWrites, _ := cnt.snapshot()
		r.stop(b)

		b.ReportMetric(float64(n), "CRs")
		b.ReportMetric(baseline.Seconds(), "s-baseline-create")
		b.ReportMetric(converge.Seconds(), "s-to-ready")
		b.ReportMetric(float64(writes)/float64(n), "writes/CR")
		b.ReportMetric(resync.Seconds(), "s-resync")
		b.ReportMetric(float64(resyncWrites), "resync-writes")
		b.ReportMetric(float64(after.HeapInuse-min(after.HeapInuse, before.HeapInuse))/float64(1<<20), "MiB-heap")
		b.Logf("%d CRs: API server alone accepted them in %s; stencil brought them to Ready in %s with %.2f writes per CR; resync took %s with %d writes; heap grew %.1f MiB",
			n, baseline.Round(time.Millisecond), converge.Round(time.Millisecond), float64(writes)/float64(n),
			resync.Round(time.Millisecond), resyncWrites, float64(after.HeapInuse-min(after.HeapInuse, before.HeapInuse))/float64(1<<20))
	}
}
