package renderworker_test

import (
	"errors"
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
	if !renderworker.Available() {
		t.Skip("render workers need Linux")
	}
	reg := prometheus.NewRegistry()
	m := renderworker.NewMetrics(reg)
	pool, err := renderworker.NewPool(renderworker.Options{Size: 1, Logger: klog.Background(), Metrics: m, Env: env})
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
// overflow, SIGKILL from outside) and checks that the render fails with
// RenderKilled naming the template and the bound, and that the next
// render, in a replacement worker, succeeds.
func TestKilledWorkerIsReplaced(t *testing.T) {
	cases := []struct {
		name, do, reason, bound string
		env                     []string
		kill                    bool
	}{
		{name: "memory", do: "allocate", reason: "memory", bound: "renderBudget.memoryMiB 256 MiB"},
		{name: "deadline", do: "spin", reason: "deadline", bound: "renderBudget.timeoutSeconds 3s"},
		{name: "fatal error", do: "recurse", reason: "stack", bound: "stack overflow", env: []string{envMaxStack + "=262144"}},
		{name: "SIGKILL", do: "spin", reason: "crash", bound: "signal: killed", kill: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, m, reg := load(t, tc.env...)
			renderOK(t, s)
			var wg sync.WaitGroup
			if tc.kill {
				wg.Go(func() { killWorkerWhenBusy(t) })
			}
			start := time.Now()
			_, err := s.RenderWith(probe("hostile", map[string]any{"do": tc.do}), nil)
			took := time.Since(start)
			wg.Wait()
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

// killWorkerWhenBusy SIGKILLs the worker child of this process once it has
// used some CPU on the render.
func killWorkerWhenBusy(t *testing.T) {
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		for _, pid := range children() {
			if cpuTicks(pid) > 20 {
				p, err := os.FindProcess(pid)
				if err == nil {
					_ = p.Kill()
				}
				return
			}
		}
		time.Sleep(20 * time.Millisecond)
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
