package renderworker_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/klog/v2"

	"stencil.dev/stencil/controller/reload"
	"stencil.dev/stencil/renderworker"
	"stencil.dev/stencil/templates"
	"stencil.dev/stencil/templates/budget"
	"stencil.dev/stencil/templates/view"
)

// envMaxStack, in a worker of these tests, lowers the goroutine stack
// bound so that a deep include ends the worker with Go's fatal "stack
// overflow", which no recover catches.
const envMaxStack = "RENDERWORKER_TEST_MAX_STACK"

func TestMain(m *testing.M) {
	if renderworker.IsWorker() {
		if n, err := strconv.Atoi(os.Getenv(envMaxStack)); err == nil {
			debug.SetMaxStack(n)
		}
		os.Exit(renderworker.Serve(reload.WorkerLoad))
	}
	os.Exit(m.Run())
}

// load loads testdata/stencil.yaml with its sets rendering in a pool of
// one worker: a replacement is the only way a later render succeeds.
func load(t *testing.T, env ...string) (*templates.Set, *renderworker.Metrics, *prometheus.Registry) {
	t.Helper()
	return loadWith(t, renderworker.Options{Env: env, MemoBytes: -1})
}

// loadWith is load with the pool's other options as opts says (its size,
// logger and metrics are load's).
func loadWith(t *testing.T, opts renderworker.Options) (*templates.Set, *renderworker.Metrics, *prometheus.Registry) {
	t.Helper()
	if !renderworker.Available() {
		t.Skip("render workers need Linux")
	}
	reg := prometheus.NewRegistry()
	m := renderworker.NewMetrics(reg)
	opts.Size, opts.Logger, opts.Metrics = 1, klog.Background(), m
	pool, err := renderworker.NewPool(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	_, sets, err := reload.Source{Path: "testdata/stencil.yaml", Wall: pool}.Load()
	if err != nil {
		t.Fatal(err)
	}
	return sets[0], m, reg
}

func probe(name string, spec map[string]any) *view.Object {
	return &view.Object{Name: name, Namespace: "ns", UID: "u-" + name, Generation: 1,
		Labels: map[string]string{}, Annotations: map[string]string{}, Spec: spec, Status: map[string]any{},
		Resource: view.ResourceInfo{Group: "test.example.com", Version: "v1", Kind: "Probe", Resource: "probes"}}
}

// renderOK renders a benign probe and checks what came back.
func renderOK(t *testing.T, s *templates.Set) {
	t.Helper()
	r, err := s.RenderWith(probe("fine", map[string]any{"ratio": 2.0}), nil)
	if err != nil {
		t.Fatalf("benign render: %v", err)
	}
	if len(r.Children) != 1 || r.Children[0].GetName() != "fine" {
		t.Fatalf("benign render: children %v", r.Children)
	}
	if r.Status["rendered"] != "fine" {
		t.Fatalf("benign render: status %v", r.Status)
	}
}

// TestKilledWorkerIsReplaced kills a worker mid-render each way a render
// can end one (its memory bound, its deadline, Go's fatal stack
// overflow) and checks that the render fails with
// RenderKilled naming the template and the bound, and that the next
// render, in a replacement worker, succeeds.
func TestKilledWorkerIsReplaced(t *testing.T) {
	cases := []struct {
		name, do, reason, bound string
		env                     []string
	}{
		{name: "memory", do: "allocate", reason: "memory", bound: "renderBudget.memoryMiB 256 MiB"},
		{name: "deadline", do: "spin", reason: "deadline", bound: "renderBudget.timeoutSeconds 3s"},
		{name: "fatal error", do: "recurse", reason: "stack", bound: "stack overflow", env: []string{envMaxStack + "=262144"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, m, reg := load(t, tc.env...)
			renderOK(t, s)
			start := time.Now()
			_, err := s.RenderWith(probe("hostile", map[string]any{"do": tc.do}), nil)
			took := time.Since(start)
			if !errors.Is(err, templates.ErrRenderKilled) {
				t.Fatalf("want a killed render, got %v", err)
			}
			var ke *renderworker.KilledError
			if !errors.As(err, &ke) || ke.Reason != tc.reason {
				t.Fatalf("want reason %s, got %v", tc.reason, err)
			}
			if msg := err.Error(); !strings.HasPrefix(msg, "probe.yaml.tmpl: ") || !strings.Contains(msg, tc.bound) {
				t.Fatalf("the message names neither the template nor the bound %q: %s", tc.bound, msg)
			}
			if took > 4*time.Second {
				t.Errorf("the render took %v, over its deadline (3s) plus a second", took)
			}
			t.Logf("%s in %v: %v", tc.name, took.Round(time.Millisecond), err)
			renderOK(t, s)
			if got := testutil.ToFloat64(m.Killed(tc.reason)); got != 1 {
				t.Errorf("stencil_renders_killed_total{reason=%q} = %v, want 1", tc.reason, got)
			}
			if n, _ := testutil.GatherAndCount(reg, "stencil_render_worker_starts_total"); n != 1 {
				t.Errorf("no starts counter")
			}
		})
	}
}

// TestLostWorkerIsNotBlamed kills workers from outside the render, as the
// node's OOM killer or a person would (SIGKILL): an idle worker killed
// before a render costs that render nothing (it runs again in a new
// worker), and a render whose worker is killed twice in a row fails with
// ErrWorkerLost, transient, never RenderKilled.
func TestLostWorkerIsNotBlamed(t *testing.T) {
	t.Run("idle", func(t *testing.T) {
		s, m, reg := load(t)
		renderOK(t, s)
		for i := range 3 {
			killIdleWorkers(t)
			renderOK(t, s)
			if got := counterValue(t, reg, "stencil_render_worker_exits_total", "lost"); got != float64(i+1) {
				t.Errorf("after %d idle kills: stencil_render_worker_exits_total{reason=lost} = %v", i+1, got)
			}
		}
		for _, r := range []string{"crash", "memory", "deadline"} {
			if got := testutil.ToFloat64(m.Killed(r)); got != 0 {
				t.Errorf("stencil_renders_killed_total{reason=%q} = %v, want 0: no render killed its worker", r, got)
			}
		}
	})
	t.Run("mid-render, twice", func(t *testing.T) {
		s, _, _ := load(t)
		renderOK(t, s)
		var wg sync.WaitGroup
		wg.Go(func() { killWorkerWhenBusy(t); killWorkerWhenBusy(t) })
		_, err := s.RenderWith(probe("slow", map[string]any{"do": "spin"}), nil)
		wg.Wait()
		if !errors.Is(err, templates.ErrWorkerLost) || errors.Is(err, templates.ErrRenderKilled) {
			t.Fatalf("want ErrWorkerLost and not ErrRenderKilled, got %v", err)
		}
		if !strings.Contains(err.Error(), "signal: killed") {
			t.Errorf("the error does not say how the worker ended: %v", err)
		}
		renderOK(t, s)
	})
}

// TestWorkerRendersFromSnapshot deletes the config's directory after the
// load and kills the worker: its replacement compiles the snapshot the
// controller took, not the disk, and renders.
func TestWorkerRendersFromSnapshot(t *testing.T) {
	pool := newPool(t, 1)
	dir := t.TempDir()
	for _, f := range []string{"stencil.yaml", "probe.yaml.tmpl", "status.yaml.tmpl"} {
		b, err := os.ReadFile(filepath.Join("testdata", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	_, sets, err := reload.Source{Path: filepath.Join(dir, "stencil.yaml"), Wall: pool}.Load()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	renderOK(t, sets[0])
	killIdleWorkers(t)
	renderOK(t, sets[0])
}

// TestCurrentStopsOldWorkers loads two snapshots of one config into one
// pool and makes the second current: the first's idle worker stops, and
// every worker process left names the second snapshot in its environment.
func TestCurrentStopsOldWorkers(t *testing.T) {
	pool := newPool(t, 2)
	dir := t.TempDir()
	write := func(status string) {
		for f, b := range map[string]string{"stencil.yaml": mustRead(t, "testdata/stencil.yaml"), "probe.yaml.tmpl": mustRead(t, "testdata/probe.yaml.tmpl"), "status.yaml.tmpl": status} {
			if err := os.WriteFile(filepath.Join(dir, f), []byte(b), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	write(mustRead(t, "testdata/status.yaml.tmpl"))
	cfg1, old, err := reload.Source{Path: filepath.Join(dir, "stencil.yaml"), Wall: pool}.Load()
	if err != nil {
		t.Fatal(err)
	}
	pool.Current(old)
	renderOK(t, old[0])
	write(mustRead(t, "testdata/status.yaml.tmpl") + "\n# a new revision\n")
	cfg2, cur, err := reload.Source{Path: filepath.Join(dir, "stencil.yaml"), Wall: pool}.Load()
	if err != nil {
		t.Fatal(err)
	}
	if cfg1.Snapshot().Digest == cfg2.Snapshot().Digest {
		t.Fatal("two different configs have one digest")
	}
	pool.Current(cur)
	renderOK(t, cur[0])
	want := cfg2.Snapshot().Digest
	deadline := time.Now().Add(10 * time.Second)
	for {
		var digests []string
		for _, pid := range children() {
			digests = append(digests, workerSnapshot(pid))
		}
		if len(digests) == 1 && digests[0] == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("worker processes serve %v, want only [%s]", digests, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func mustRead(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// workerSnapshot is the snapshot digest in a worker's environment.
func workerSnapshot(pid int) string {
	b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	for _, kv := range strings.Split(string(b), "\x00") {
		if v, ok := strings.CutPrefix(kv, renderworker.EnvSnapshot+"="); ok {
			return v
		}
	}
	return ""
}

// killIdleWorkers SIGKILLs this process's worker children and waits until
// they are gone from /proc's list of its live children.
func killIdleWorkers(t *testing.T) {
	t.Helper()
	pids := children()
	if len(pids) == 0 {
		t.Fatal("no worker to kill")
	}
	for _, pid := range pids {
		if p, err := os.FindProcess(pid); err == nil {
			_ = p.Kill()
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for _, pid := range pids {
		for alive(pid) {
			if time.Now().After(deadline) {
				t.Fatalf("worker %d still alive 5s after SIGKILL", pid)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// alive says whether pid runs (a zombie, killed and not yet reaped, does
// not).
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	return len(f) > 0 && f[0] != "Z"
}

// counterValue is the value of the series of name whose only label is
// value (value empty: the series without labels), in reg.
func counterValue(t *testing.T, reg *prometheus.Registry, name, value string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if (value == "" && len(m.GetLabel()) == 0) || (len(m.GetLabel()) == 1 && m.GetLabel()[0].GetValue() == value) {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// killWorkerWhenBusy SIGKILLs a worker child of this process that is
// rendering now: one whose CPU time grew by at least 2 ticks (20 ms on
// Linux's 100 Hz, a fifth of a core on a loaded machine) in the last
// 100 ms; an idle worker uses none. Not one that used CPU once: the
// workers other tests' pools keep (FuzzWall's, FuzzSameInTwoWorkers')
// have, and killing one of those leaves the spinning render to its
// deadline.
func killWorkerWhenBusy(t *testing.T) {
	deadline := time.Now().Add(5 * time.Second)
	before := map[int]int{}
	for time.Now().Before(deadline) {
		for _, pid := range children() {
			// A worker killed before stays a zombie, its ticks counted,
			// until the pool reaps it: only a live one is busy.
			if !alive(pid) {
				continue
			}
			ticks := cpuTicks(pid)
			if last, seen := before[pid]; seen && ticks-last >= 2 {
				if p, err := os.FindProcess(pid); err == nil {
					_ = p.Kill()
				}
				return
			}
			before[pid] = ticks
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Error("no busy worker to kill")
}

// children lists this process's children, from /proc.
func children() []int {
	var out []int
	self := strconv.Itoa(os.Getpid())
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, p := range stats {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
		if len(f) > 1 && f[1] == self {
			pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(p)))
			out = append(out, pid)
		}
	}
	return out
}

// cpuTicks is a process's user plus system time, in clock ticks.
func cpuTicks(pid int) int {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.Atoi(f[11])
	s, _ := strconv.Atoi(f[12])
	return u + s
}

// liveChildren answers observed from a map.
type liveChildren map[string]*unstructured.Unstructured

func (l liveChildren) Child(kind, name string) (*unstructured.Unstructured, bool) {
	u, ok := l[kind+"/"+name]
	return u, ok
}
func (l liveChildren) Ready(*unstructured.Unstructured) bool { return true }
func (l liveChildren) Current(want, live *unstructured.Unstructured) bool {
	return want.GetName() == live.GetName()
}

// TestWorkerReadsLiveChildren renders a template that reads a live child
// through the worker's questions, and checks numbers keep their types
// across the pipe (a float with an integral value stays a float).
func TestWorkerReadsLiveChildren(t *testing.T) {
	s, _, _ := load(t)
	other := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "other"}, "data": map[string]any{"value": "from-the-cluster"}}}
	r, err := s.RenderWith(probe("reader", map[string]any{"readOther": true, "ratio": 3.0}), liveChildren{"ConfigMap/other": other})
	if err != nil {
		t.Fatal(err)
	}
	data := r.Children[0].Object["data"].(map[string]any)
	if data["ratioKind"] != "float64" {
		t.Errorf("spec.ratio 3.0 reached the template as %v, want float64", data["ratioKind"])
	}
	if data["other"] != "from-the-cluster" {
		t.Errorf("observed through the worker: data %v", data)
	}
	in, err := s.RenderHere(probe("reader", map[string]any{"readOther": true, "ratio": 3.0}), liveChildren{"ConfigMap/other": other}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := r.Children[0].Object, in.Children[0].Object; !reflect.DeepEqual(got, want) {
		t.Errorf("through the worker %v, in this process %v", got, want)
	}
}

// TestResultNodesBound: a render whose result holds more values than
// renderBudget.resultNodes is refused naming the bound, and a result
// under it is returned whole.
func TestResultNodesBound(t *testing.T) {
	s, _, _ := load(t)
	r, err := s.RenderWith(probe("few", map[string]any{"do": "values", "rows": int64(10), "cols": int64(100)}), nil)
	if err != nil {
		t.Fatalf("1,000 values: %v", err)
	}
	if items, _ := r.Children[0].Object["items"].([]any); len(items) != 1000 {
		t.Fatalf("1,000 values: %d items came back", len(items))
	}
	_, err = s.RenderWith(probe("many", map[string]any{"do": "values", "rows": int64(60), "cols": int64(1000)}), nil)
	if !errors.Is(err, budget.ErrExceeded) || !strings.Contains(err.Error(), "renderBudget.resultNodes") || !strings.Contains(err.Error(), "50000") {
		t.Fatalf("60,000 values: want a budget error naming renderBudget.resultNodes and its value, got %v", err)
	}
	renderOK(t, s)
}

// TestTinyValuesStayInTheWorker renders four results of about 1.2 MiB of
// empty mappings at once (480,000 values in all, 48 MiB or more of Go
// maps if decoded) and samples this process's resident memory meanwhile:
// it stays within 20% of where it was (plus 8 MiB of slack for the frames
// and the test itself), because the workers refuse such results before
// they are sent. It measures memory, so it runs without the race detector
// (make unit runs it so): under it, the workers (this test binary) take
// past their deadline to build the results.
func TestTinyValuesStayInTheWorker(t *testing.T) {
	if raceEnabled {
		t.Skip("measures resident memory and the workers' output: run without -race (make unit does)")
	}
	pool := newPool(t, 4)
	_, sets, err := reload.Source{Path: "testdata/stencil.yaml", Wall: pool}.Load()
	if err != nil {
		t.Fatal(err)
	}
	renderOK(t, sets[0])
	debug.FreeOSMemory()
	before := rssKiB(t)
	peak := before
	done := make(chan struct{})
	var sampler sync.WaitGroup
	sampler.Go(func() {
		for {
			select {
			case <-done:
				return
			case <-time.After(5 * time.Millisecond):
				peak = max(peak, rssKiB(t))
			}
		}
	})
	var renders sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		renders.Go(func() {
			_, errs[i] = sets[0].RenderWith(probe(fmt.Sprintf("tiny-%d", i), map[string]any{"do": "values", "rows": int64(120), "cols": int64(1000)}), nil)
		})
	}
	renders.Wait()
	close(done)
	sampler.Wait()
	for i, err := range errs {
		// A worker that builds the result past its own memory bound
		// (on a busy machine its collector lags) keeps it as surely.
		nodes := errors.Is(err, budget.ErrExceeded) && strings.Contains(err.Error(), "renderBudget.resultNodes")
		memory := errors.Is(err, templates.ErrRenderKilled) && strings.Contains(err.Error(), "renderBudget.memoryMiB")
		if !nodes && !memory {
			t.Errorf("render %d: want the node bound (or the worker's memory bound), got %v", i, err)
		}
	}
	t.Logf("resident memory: %d KiB before, %d KiB at its peak during 4 renders of 120,000 values each", before, peak)
	if float64(peak) > 1.2*float64(before)+8<<10 {
		t.Errorf("resident memory went from %d KiB to %d KiB: over 20%% (plus 8 MiB)", before, peak)
	}
}

// rssKiB is this process's resident set, from /proc/self/status.
func rssKiB(t *testing.T) int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Error(err)
		return 0
	}
	for l := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n
		}
	}
	return 0
}

// TestReusedWorkerIsDemoted: a slow render on a worker that rendered
// before is demoted (its place lent, the pool's slow hook told) as on a
// fresh worker; a worker kept after a render once stayed "finished" and
// was never demoted again.
func TestReusedWorkerIsDemoted(t *testing.T) {
	pool := newPool(t, 1)
	var mu sync.Mutex
	slow := 0
	pool.SetSlow(func() func() {
		mu.Lock()
		slow++
		mu.Unlock()
		return func() {}
	})
	_, sets, err := reload.Source{Path: "testdata/stencil.yaml", Wall: pool}.Load()
	if err != nil {
		t.Fatal(err)
	}
	renderOK(t, sets[0])
	renderOK(t, sets[0])
	before := children()
	_, err = sets[0].RenderWith(probe("slow", map[string]any{"do": "spin"}), nil)
	if !errors.Is(err, templates.ErrRenderKilled) {
		t.Fatalf("want the spin killed at its deadline, got %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if slow != 1 {
		t.Errorf("the slow render on the reused worker (pid %v) was demoted %d times, want 1", before, slow)
	}
}

// newPool returns a pool of size workers, closed when the test ends; it
// skips the test where render workers are not available.
func newPool(t *testing.T, size int) *renderworker.Pool {
	t.Helper()
	if !renderworker.Available() {
		t.Skip("render workers need Linux")
	}
	pool, err := renderworker.NewPool(renderworker.Options{Size: size, Logger: klog.Background(), MemoBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// liveNone is a Live with no children: a render given it may ask.
type liveNone struct{}

func (liveNone) Child(string, string) (*unstructured.Unstructured, bool) { return nil, false }
func (liveNone) Ready(*unstructured.Unstructured) bool                   { return false }
func (liveNone) Current(_, _ *unstructured.Unstructured) bool            { return true }

// TestRenderReusedFromTheMemo renders the same request again through a
// pool with its memo: the second render is answered without a worker,
// equal to the first and a copy of its own; a change to the spec or the
// status, or a render given live children, crosses the wall again.
func TestRenderReusedFromTheMemo(t *testing.T) {
	s, _, reg := loadWith(t, renderworker.Options{})
	reused := func() float64 { return counterValue(t, reg, "stencil_renders_reused_total", "") }
	render := func(o *view.Object, live templates.Live) *templates.Result {
		t.Helper()
		r, err := s.RenderWith(o, live)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	spec := func() map[string]any {
		return map[string]any{"ratio": 2.0, "a": "x", "b": int64(3), "c": map[string]any{"d": "e", "f": "g"}}
	}

	first := render(probe("same", spec()), nil)
	second := render(probe("same", spec()), nil)
	if got := reused(); got != 1 {
		t.Fatalf("the same request twice: stencil_renders_reused_total = %v, want 1", got)
	}
	if !reflect.DeepEqual(first, second) {
		t.Fatalf("the reused render differs:\n%#v\n%#v", first, second)
	}
	second.Children[0].SetLabels(map[string]string{"stamped": "yes"})
	if third := render(probe("same", spec()), nil); third.Children[0].GetLabels()["stamped"] != "" {
		t.Fatal("a reused render shares its children with an earlier one")
	}
	if got := reused(); got != 2 {
		t.Fatalf("stencil_renders_reused_total = %v, want 2", got)
	}

	changed := spec()
	changed["ratio"] = 3.0
	if r := render(probe("same", changed), nil); r.Children[0].Object["data"].(map[string]any)["ratio"] != "3" {
		t.Fatalf("a changed spec rendered %v", r.Children[0].Object["data"])
	}
	// The probe's "deeper" helper hands . to int, so the set may read the
	// status (templates.Set.Visible): a changed status is a new request.
	if !s.SeesStatus() {
		t.Fatal("the probe set does not see the status: a changed status would not reach the wall")
	}
	withStatus := probe("same", spec())
	withStatus.Status = map[string]any{"phase": "Ready"}
	render(withStatus, nil)
	render(probe("same", spec()), liveNone{})
	if got := reused(); got != 2 {
		t.Fatalf("a changed spec, a changed status and a render with live children: stencil_renders_reused_total = %v, want 2 (none reused)", got)
	}
}
