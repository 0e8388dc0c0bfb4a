//go:build integration

package integration

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"k8s.io/client-go/dynamic"
)

// BenchmarkMemory compares what two stencil binaries hold for the same
// converged workload: the one built from this tree (STENCIL_BENCH_BIN) and
// a baseline built from an earlier commit (STENCIL_BENCH_BASELINE_BIN, with
// that commit's config in STENCIL_BENCH_BASELINE_CONFIG; make bench builds
// it from BENCH_BASELINE_REF, the tree before the lean caches). Each runs
// as its own process, first on an empty namespace (what the process holds
// for nothing) and then on STENCIL_BENCH_CRS converged WebApps; memory per
// resource is the difference divided by N. The baseline runs first and
// converges the WebApps; the current binary then starts on them. Heap is
// the live heap at the first garbage collection after settling (see
// process.memory), RSS is VmRSS at that moment.
func BenchmarkMemory(b *testing.B) {
	current, baseline := os.Getenv("STENCIL_BENCH_BIN"), os.Getenv("STENCIL_BENCH_BASELINE_BIN")
	baselineConfig := os.Getenv("STENCIL_BENCH_BASELINE_CONFIG")
	if current == "" || baseline == "" || baselineConfig == "" {
		b.Skip("STENCIL_BENCH_BIN, STENCIL_BENCH_BASELINE_BIN and STENCIL_BENCH_BASELINE_CONFIG name the binaries to compare; make bench sets them")
	}
	ctx := context.Background()
	admin := dynamic.NewForConfigOrDie(restConfig(b))
	installCRDs(ctx, b, admin)
	n := benchCRs(b)
	config, err := filepath.Abs(filepath.Join(root, "crds", "stencil.yaml"))
	if err != nil {
		b.Fatal(err)
	}

	for b.Loop() {
		stamp := time.Now().UnixNano() % 1000000
		empty := fmt.Sprintf("bench-mem-empty-%d", stamp)
		full := fmt.Sprintf("bench-mem-%d", stamp)
		newNamespace(ctx, b, admin, empty)
		newNamespace(ctx, b, admin, full)

		type figures struct{ heap0, rss0, heap, rss uint64 }
		measureBinary := func(name, bin, config string, converge bool) figures {
			var f figures
			p := startProcess(b, name+"-empty", bin, config, empty)
			p.settle(b, 0)
			f.heap0, f.rss0 = p.memory(b)
			p.stop(b)
			if converge {
				createWebApps(ctx, b, admin, full, n)
			}
			w := watchReady(ctx, b, admin, full, n)
			p = startProcess(b, name, bin, config, full)
			w.wait(b, name, 60*time.Minute)
			p.settle(b, n)
			f.heap, f.rss = p.memory(b)
			p.stop(b)
			return f
		}
		old := measureBinary("baseline", baseline, baselineConfig, true)
		cur := measureBinary("current", current, config, false)
		per := func(v, v0 uint64) float64 { return kib(v, v0, n) }
		for _, r := range []struct {
			name string
			f    figures
		}{{"baseline", old}, {"current", cur}} {
			b.Logf("%-8s empty: live heap %.1f MiB, RSS %.1f MiB; %d WebApps: live heap %.1f MiB, RSS %.1f MiB; per resource: live heap %.1f KiB, RSS %.1f KiB",
				r.name, mib(r.f.heap0), mib(r.f.rss0), n, mib(r.f.heap), mib(r.f.rss), per(r.f.heap, r.f.heap0), per(r.f.rss, r.f.rss0))
		}
		heapRatio := per(cur.heap, cur.heap0) / per(old.heap, old.heap0)
		rssRatio := per(cur.rss, cur.rss0) / per(old.rss, old.rss0)
		b.Logf("current/baseline memory per resource: live heap %.2fx, RSS %.2fx", heapRatio, rssRatio)
		b.ReportMetric(float64(n), "CRs")
		b.ReportMetric(per(old.heap, old.heap0), "KiB-heap/CR-baseline")
		b.ReportMetric(per(cur.heap, cur.heap0), "KiB-heap/CR")
		b.ReportMetric(per(old.rss, old.rss0), "KiB-RSS/CR-baseline")
		b.ReportMetric(per(cur.rss, cur.rss0), "KiB-RSS/CR")
	}
}

func mib(v uint64) float64 { return float64(v) / (1 << 20) }

// process is one stencil binary running against the plane.
type process struct {
	name    string
	cmd     *exec.Cmd
	metrics string // URL of its /metrics
	done    chan error
}

// startProcess runs bin with config on namespace ns with 2 workers, its log
// in .cluster/logs/bench-<name>.log. The client limit is raised to 500 QPS:
// this benchmark measures memory, and the baseline spends about 6
// rate-limited requests per new resource, a 10-minute wait at 10,000 and
// 100 QPS.
func startProcess(b *testing.B, name, bin, config, ns string) *process {
	b.Helper()
	metricsAddr, healthAddr := freeAddr(b), freeAddr(b)
	logs := filepath.Join(root, ".cluster", "logs")
	if err := os.MkdirAll(logs, 0o755); err != nil {
		b.Fatal(err)
	}
	log, err := os.Create(filepath.Join(logs, "bench-"+name+".log"))
	if err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(bin, "run", "--config", config, "--namespace", ns, "--workers", "2",
		"--qps", "500", "--burst", "1000", "--metrics-addr", metricsAddr, "--health-addr", healthAddr)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	p := &process{name: name, cmd: cmd, metrics: "http://" + metricsAddr + "/metrics", done: make(chan error, 1)}
	go func() { p.done <- cmd.Wait(); log.Close() }()
	b.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
		}
	})
	return p
}

func freeAddr(b *testing.B) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// scrape sums each metric family of the process's /metrics.
func (p *process) scrape() (map[string]float64, error) {
	resp, err := http.Get(p.metrics)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, err
	}
	sums := map[string]float64{}
	for name, mf := range mfs {
		for _, m := range mf.GetMetric() {
			switch {
			case m.GetCounter() != nil:
				sums[name] += m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				sums[name] += m.GetGauge().GetValue()
			case m.GetUntyped() != nil:
				sums[name] += m.GetUntyped().GetValue()
			}
		}
	}
	return sums, nil
}

// settle waits until the process has reconciled at least n resources and
// its queue has stayed empty for 5 s.
func (p *process) settle(b *testing.B, n int) {
	b.Helper()
	var quietSince time.Time
	poll(b, 10*time.Minute, fmt.Sprintf("%s: %d reconciles and a queue empty for 5s", p.name, n), func() (bool, error) {
		select {
		case err := <-p.done:
			return false, fmt.Errorf("%s exited: %v", p.name, err)
		default:
		}
		m, err := p.scrape()
		if err != nil {
			return false, nil // not listening yet
		}
		if m["stencil_reconcile_total"] < float64(n) || m["workqueue_depth"] != 0 || m["workqueue_unfinished_work_seconds"] != 0 {
			quietSince = time.Time{}
			return false, nil
		}
		if quietSince.IsZero() {
			quietSince = time.Now()
		}
		return time.Since(quietSince) >= 5*time.Second, nil
	})
}

// memory waits for the process's next garbage collection (the runtime
// forces one at least every 2 minutes) and returns its live heap as that
// collection measured it, and the process's RSS. The live heap is the next
// GC goal halved: with GOGC=100 the goal is twice what the collection found
// live (stacks and globals aside), whereas heap in use swings between 1x and
// 2x of it depending on when the last collection ran.
func (p *process) memory(b *testing.B) (heap, rss uint64) {
	b.Helper()
	m, err := p.scrape()
	if err != nil {
		b.Fatalf("%s: %v", p.name, err)
	}
	before := m["go_memstats_last_gc_time_seconds"]
	poll(b, 3*time.Minute, p.name+": a garbage collection after settling", func() (bool, error) {
		if m, err = p.scrape(); err != nil {
			return false, err
		}
		return m["go_memstats_last_gc_time_seconds"] > before, nil
	})
	heap = uint64(m["go_memstats_next_gc_bytes"] / 2)
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseUint(f[1], 10, 64)
			rss = kb << 10
		}
	}
	return heap, rss
}

// stop sends SIGTERM and waits for the process to exit.
func (p *process) stop(b *testing.B) {
	b.Helper()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(60 * time.Second):
		_ = p.cmd.Process.Kill()
		b.Fatalf("%s did not exit within 60s of SIGTERM", p.name)
	}
}
