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

		type figures struct{ empty, full mem }
		measureBinary := func(name, bin, config string, converge bool) figures {
			var f figures
			p := startProcess(b, name+"-empty", bin, config, empty)
			p.settle(b, 0)
			f.empty = p.memory(b)
			p.stop(b)
			if converge {
				createWebApps(ctx, b, admin, full, n)
			}
			w := watchReady(ctx, b, admin, full, n)
			p = startProcess(b, name, bin, config, full)
			w.wait(b, name, 60*time.Minute)
			p.settle(b, n)
			f.full = p.memory(b)
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
			e, f := r.f.empty, r.f.full
			b.Logf("%-8s (GOGC %.0f) empty: live heap %.1f MiB, RSS %.1f MiB (anon %.1f, file %.1f); %d WebApps: live heap %.1f MiB, RSS %.1f MiB (anon %.1f, file %.1f), %.1f CPU s from start to settled; per resource: live heap %.1f KiB, RSS %.1f KiB",
				r.name, f.gcPercent, mib(e.heap), mib(e.rss), mib(e.anon), mib(e.file), n, mib(f.heap), mib(f.rss), mib(f.anon), mib(f.file), f.cpu,
				per(f.heap, e.heap), per(f.rss, e.rss))
			b.Logf("%-8s controller and render workers, Pss summed: empty %.1f MiB (%d workers); %d WebApps %.1f MiB (%d workers)",
				r.name, mib(e.pss), e.workers, n, mib(f.pss), f.workers)
		}
		heapRatio := per(cur.full.heap, cur.empty.heap) / per(old.full.heap, old.empty.heap)
		rssRatio := per(cur.full.rss, cur.empty.rss) / per(old.full.rss, old.empty.rss)
		b.Logf("current/baseline memory per resource: live heap %.2fx, RSS %.2fx; process RSS %.2fx", heapRatio, rssRatio, float64(cur.full.rss)/float64(old.full.rss))
		b.ReportMetric(float64(n), "CRs")
		b.ReportMetric(per(old.full.heap, old.empty.heap), "KiB-heap/CR-baseline")
		b.ReportMetric(per(cur.full.heap, cur.empty.heap), "KiB-heap/CR")
		b.ReportMetric(per(old.full.rss, old.empty.rss), "KiB-RSS/CR-baseline")
		b.ReportMetric(per(cur.full.rss, cur.empty.rss), "KiB-RSS/CR")
		b.ReportMetric(mib(cur.full.rss), "MiB-RSS")
		b.ReportMetric(mib(cur.full.pss), "MiB-Pss-tree")
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
	return startProcessArgs(b, name, bin, "--config", config, "--namespace", ns, "--workers", "2", "--qps", "500", "--burst", "1000")
}

// startProcessArgs runs bin run with args, its own metrics and health
// addresses, and its log in .cluster/logs/bench-<name>.log.
func startProcessArgs(b testing.TB, name, bin string, args ...string) *process {
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
	cmd := exec.Command(bin, append(append([]string{"run"}, args...), "--metrics-bind-address", metricsAddr, "--health-probe-bind-address", healthAddr)...)
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

func freeAddr(b testing.TB) string {
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
func (p *process) settle(b testing.TB, n int) {
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

// mem is what a process holds at one moment.
type mem struct {
	heap      uint64  // live heap, bytes
	rss       uint64  // VmRSS, bytes
	anon      uint64  // RssAnon: heap, stacks, runtime
	file      uint64  // RssFile: resident pages of the binary
	cpu       float64 // CPU seconds used so far
	gcPercent float64 // the GOGC it runs with
	// pss is the Pss of the process and its render workers summed (RSS
	// summed would count the binary they share once per process);
	// workers is how many there were.
	pss     uint64
	workers int
}

// memory waits for the process's next garbage collection (the runtime
// forces one at least every 2 minutes) and returns its live heap as that
// collection measured it, its RSS and its CPU seconds. The live heap is
// the next GC goal divided by 1+GOGC/100: the goal is that multiple of what
// the collection found live (stacks and globals aside), whereas heap in use
// swings between 1x and the goal depending on when the last collection ran.
func (p *process) memory(b *testing.B) mem {
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
	f := mem{gcPercent: m["go_gc_gogc_percent"], cpu: m["process_cpu_seconds_total"]}
	f.heap = uint64(m["go_memstats_next_gc_bytes"] / (1 + f.gcPercent/100))
	st, err := procStatus(strconv.Itoa(p.cmd.Process.Pid))
	if err != nil {
		b.Fatal(err)
	}
	f.rss, f.anon, f.file = st["VmRSS"], st["RssAnon"], st["RssFile"]
	f.pss, f.workers = treePss(p.cmd.Process.Pid)
	return f
}

// treePss sums the Pss (/proc/PID/smaps_rollup) of pid and of its
// children, the render workers, and counts the children.
func treePss(pid int) (uint64, int) {
	pss := func(pid string) uint64 {
		data, err := os.ReadFile("/proc/" + pid + "/smaps_rollup")
		if err != nil {
			return 0
		}
		for _, line := range strings.Split(string(data), "\n") {
			if f := strings.Fields(line); len(f) == 3 && f[0] == "Pss:" {
				kb, _ := strconv.ParseUint(f[1], 10, 64)
				return kb << 10
			}
		}
		return 0
	}
	self := strconv.Itoa(pid)
	total, workers := pss(self), 0
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, st := range stats {
		data, err := os.ReadFile(st)
		if err != nil {
			continue
		}
		f := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+1:]))
		if len(f) > 1 && f[1] == self && f[0] != "Z" {
			total += pss(filepath.Base(filepath.Dir(st)))
			workers++
		}
	}
	return total, workers
}

// stop sends SIGTERM and waits for the process to exit.
func (p *process) stop(b testing.TB) {
	b.Helper()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(60 * time.Second):
		_ = p.cmd.Process.Kill()
		b.Fatalf("%s did not exit within 60s of SIGTERM", p.name)
	}
}
