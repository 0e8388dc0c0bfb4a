//go:build integration

package integration

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"stencil.dev/stencil/controller"
)

// benchCRs is the number of WebApps BenchmarkConverge creates;
// STENCIL_BENCH_CRS overrides it (the plane is sized for 10000).
func benchCRs(b *testing.B) int { return positiveEnv(b, "STENCIL_BENCH_CRS", 1000) }

// positiveEnv is the positive integer in the environment variable name,
// or def when it is unset.
func positiveEnv(b *testing.B, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		b.Fatalf("%s=%q: want a positive integer", name, v)
	}
	return n
}

// createWebApps creates n WebApps in ns with 8 parallel clients.
func createWebApps(ctx context.Context, b *testing.B, dyn dynamic.Interface, ns string, n int) {
	createResources(ctx, b, dyn, webapps, "WebApp", "web", ns, n, map[string]any{"image": "registry.k8s.io/pause:3.10", "replicas": int64(1), "port": int64(8080)})
}

// createResources creates n custom resources of res in ns, named
// <prefix>-00000..., each with spec, with 8 parallel clients.
func createResources(ctx context.Context, b *testing.B, dyn dynamic.Interface, res schema.GroupVersionResource, kind, prefix, ns string, n int, spec map[string]any) {
	var wg sync.WaitGroup
	errs := make(chan error, n)
	sem := make(chan struct{}, 8)
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			obj := cr(res, kind, ns, fmt.Sprintf("%s-%05d", prefix, i), spec)
			if _, err := createOnce(ctx, dyn.Resource(res).Namespace(ns), obj); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
}

// readyWatch counts the Ready WebApps of one namespace from a watch, so
// that waiting for all of them costs the plane nothing: a LIST of every
// WebApp several times a second would load the API server during the very
// run it measures.
type readyWatch struct {
	mu    sync.Mutex
	ready map[string]bool
	n     int
	all   chan struct{} // closed once n are Ready
	at    time.Time     // when they were
	stop  context.CancelFunc
}

// watchReady starts counting the Ready WebApps in ns until n are.
func watchReady(ctx context.Context, b *testing.B, dyn dynamic.Interface, ns string, n int) *readyWatch {
	return watchReadyOf(ctx, b, dyn, webapps, ns, n)
}

// watchReadyOf starts counting the Ready resources of res in ns until n are.
func watchReadyOf(ctx context.Context, b *testing.B, dyn dynamic.Interface, res schema.GroupVersionResource, ns string, n int) *readyWatch {
	ctx, stop := context.WithCancel(ctx)
	w := &readyWatch{ready: map[string]bool{}, n: n, all: make(chan struct{}), stop: stop}
	inf := dynamicinformer.NewFilteredDynamicSharedInformerFactory(dyn, 0, ns, nil).ForResource(res).Informer()
	update := func(obj any) {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			return
		}
		w.mu.Lock()
		defer w.mu.Unlock()
		w.ready[u.GetName()] = isReady(u)
		count := 0
		for _, r := range w.ready {
			if r {
				count++
			}
		}
		if count == w.n && w.at.IsZero() {
			w.at = time.Now()
			close(w.all)
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: update, UpdateFunc: func(_, o any) { update(o) }}); err != nil {
		b.Fatal(err)
	}
	go inf.RunWithContext(ctx)
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		b.Fatalf("the %s watch did not sync", res.Resource)
	}
	return w
}

// wait returns when all n WebApps were Ready, at most timeout from now.
func (w *readyWatch) wait(b *testing.B, what string, timeout time.Duration) time.Time {
	defer w.stop()
	select {
	case <-w.all:
		return w.at
	case <-time.After(timeout):
		w.mu.Lock()
		defer w.mu.Unlock()
		count := 0
		for _, r := range w.ready {
			if r {
				count++
			}
		}
		b.Fatalf("%s: %d of %d resources Ready after %s", what, count, w.n, timeout)
		return time.Time{}
	}
}

// usage is what the process and its render workers hold and have spent
// at one moment.
type usage struct {
	heap, rss uint64 // bytes
	cpu       time.Duration
	workers   time.Duration // of cpu, the render workers'
	// plane is the CPU of the plane's processes: etcd, kube-apiserver,
	// kube-controller-manager and kwok (what a controller's requests and
	// watches cost the cluster).
	plane time.Duration
}

// planeProcesses are the names (/proc/PID/comm) of the plane's processes.
var planeProcesses = map[string]bool{"etcd": true, "kube-apiserver": true, "kube-controller": true, "kwok": true}

// planeCPU is the CPU time the plane's processes used so far.
func planeCPU() time.Duration {
	var total time.Duration
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		comm, err := os.ReadFile(d + "/comm")
		if err != nil || !planeProcesses[strings.TrimSpace(string(comm))] {
			continue
		}
		total += childCPU(filepath.Base(d))
	}
	return total
}

func measure() usage {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	u := usage{heap: ms.HeapInuse}
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		u.cpu = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	// The render workers (this binary's children): the CPU of those that
	// ended, and the CPU and memory of those alive.
	if syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru) == nil {
		u.workers += time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	if st, err := procStatus("self"); err == nil {
		u.rss = st["VmRSS"]
	}
	// A child is listed under the thread that started it, which for the
	// pool's workers is seldom the main one.
	var kids []string
	tasks, _ := filepath.Glob("/proc/self/task/*/children")
	for _, t := range tasks {
		b, _ := os.ReadFile(t)
		kids = append(kids, strings.Fields(string(b))...)
	}
	for _, k := range kids {
		if st, err := procStatus(k); err == nil {
			u.rss += st["VmRSS"]
		}
		u.workers += childCPU(k)
	}
	u.cpu += u.workers
	u.plane = planeCPU()
	return u
}

// childCPU is the CPU time a live child used so far (/proc/PID/stat, at
// USER_HZ 100).
func childCPU(pid string) time.Duration {
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * 10 * time.Millisecond
}

// procStatus returns the sizes in /proc/PID/status (pid "self" for this
// process), in bytes, by field name: VmRSS, RssAnon, RssFile...
func procStatus(pid string) (map[string]uint64, error) {
	data, err := os.ReadFile("/proc/" + pid + "/status")
	if err != nil {
		return nil, err
	}
	sizes := map[string]uint64{}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) == 3 && f[2] == "kB" {
			kb, _ := strconv.ParseUint(f[1], 10, 64)
			sizes[strings.TrimSuffix(f[0], ":")] = kb << 10
		}
	}
	return sizes, nil
}

// run is one controller's figures on the workload.
type run struct {
	name            string
	ready           time.Duration
	by              map[string]int
	writes, reads   int
	heap, rss       float64       // KiB per resource, growth while it ran
	cpu, workers    time.Duration // workers: of cpu, the render workers'
	resync, restart int
	events          int
	syncs, renders  float64
	// reused: of renders, those the wall's memo answered without a worker.
	reused float64
	// written is when the last child write was sent, from the first create.
	written time.Duration
	// plane is the CPU the plane used meanwhile.
	plane time.Duration
}

func (r run) perResource(n int) string {
	keys := make([]string, 0, len(r.by))
	for k := range r.by {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %.2f", k, float64(r.by[k])/float64(n)))
	}
	return strings.Join(parts, ", ")
}

// BenchmarkConverge measures stencil against the floor, a hand-written
// client-go controller doing only the minimum for the same WebApp workload
// (2 server-side applies and 1 status patch per resource; floor_test.go), run
// back to back on the same plane with the same 2 workers and client limit
// (100 QPS, burst 150): the floor, stencil, the floor, then
// STENCIL_BENCH_ROUNDS times (default 2) stencil writing as the tenant
// (identity: {tenant: builder}) and the floor, each run's namespace deleted
// before the next and the plane left to go quiet (waitQuiet). Each stencil
// run compares with the mean of the floors on either side of it, as the
// plane's pace drifts by up to 15% from one run to the next; the tenant's
// figure is the median of its rounds. For each run it prints the time from
// the first create to all N WebApps Ready and to the last child write, the
// requests per resource by verb and resource through its
// rate-limited client (events, sent by a client of their own, apart), heap
// and RSS growth per resource, CPU seconds (the render workers' apart, and
// the plane's: etcd, kube-apiserver, the controller manager and kwok),
// and syncs and renders per resource (and of those, the renders the
// wall's memo answered without a worker); for stencil also the writes of a
// forced resync and of a restart. Heap is the Go heap in use after a GC
// (all run in this process); RSS growth is the process's, so it includes
// what the first run left behind. stencil runs at the default verbosity,
// as it does in production. Run it with: make bench (STENCIL_BENCH_CRS=10000
// for the full size); go test -cpuprofile splits by run (pprof -tagfocus
// run=tenant).
func BenchmarkConverge(b *testing.B) {
	base := restConfig(b)
	base.QPS, base.Burst = 100, 150
	ctx := context.Background()
	admin := dynamic.NewForConfigOrDie(restConfig(b))
	installCRDs(ctx, b, admin)
	n := benchCRs(b)

	for b.Loop() {
		stamp := time.Now().UnixNano() % 1000000
		var runs []run
		waitQuiet(b)

		// The floor, measured before stencil and again after it: the
		// plane's pace drifts over minutes (the controller manager and
		// kwok still settling what earlier runs left), and the mean of
		// the two is what stencil's runs, in between, compare with.
		floor := func(name string) run {
			labelRun(ctx, name)
			ns := fmt.Sprintf("bench-%s-%d", name, stamp)
			newNamespace(ctx, b, admin, ns)
			cnt := &counter{mutating: map[string]int{}}
			cfg := rest.CopyConfig(base)
			cfg.Wrap(cnt.wrap)
			before := measure()
			fctx, stop := context.WithCancel(ctx)
			f := newFloor(cfg, ns)
			done := make(chan struct{})
			go func() { f.run(fctx, 2); close(done) }()
			w := watchReady(ctx, b, admin, ns, n)
			began := time.Now()
			createWebApps(ctx, b, admin, ns, n)
			ready := w.wait(b, name, 60*time.Minute).Sub(began)
			after := measure()
			stop()
			<-done
			writes, by := cnt.snapshot()
			// The next run gets the plane as this one found it: its
			// Deployments, ReplicaSets and pods would otherwise still
			// load the controller manager, kwok and the API server.
			deleteNamespace(ctx, b, admin, ns)
			return run{name: name, ready: ready, written: cnt.lastWrite(childWrites...).Sub(began), by: by, writes: writes, reads: int(cnt.reads.Load()),
				heap: kib(after.heap, before.heap, n), rss: kib(after.rss, before.rss, n), cpu: after.cpu - before.cpu, plane: after.plane - before.plane}
		}
		runs = append(runs, floor("floor-0"))

		// stencil, with its own account.
		own := func() run {
			labelRun(ctx, "stencil")
			ns := fmt.Sprintf("bench-stencil-%d", stamp)
			newNamespace(ctx, b, admin, ns)
			cnt := &counter{mutating: map[string]int{}}
			config := filepath.Join(root, "crds", "stencil.yaml")
			before := measure()
			r := startWorkers(b, base, cnt, ns, config, 2)
			w := watchReady(ctx, b, admin, ns, n)
			began := time.Now()
			createWebApps(ctx, b, admin, ns, n)
			ready := w.wait(b, "stencil", 60*time.Minute).Sub(began)
			r.settle(b, 0, n)
			after := measure()
			writeHeapProfile(b)
			writes, by := cnt.snapshot()
			events := by["POST events"] + by["PATCH events"]
			delete(by, "POST events")
			delete(by, "PATCH events")
			sr := run{name: "stencil", ready: ready, written: cnt.lastWrite(childWrites...).Sub(began), by: by, writes: writes - events, reads: int(cnt.reads.Load()), events: events,
				heap: kib(after.heap, before.heap, n), rss: kib(after.rss, before.rss, n), cpu: after.cpu - before.cpu, plane: after.plane - before.plane, workers: after.workers - before.workers,
				syncs: r.counterValue(b, "stencil_reconcile_total"), renders: r.counterValue(b, "stencil_renders_total"),
				reused: r.counterValue(b, "stencil_renders_reused_total")}

			cnt.reset()
			reconciles := r.counterValue(b, "stencil_reconcile_total")
			r.c.EnqueueAll()
			r.settle(b, reconciles, n)
			sr.resync, _ = cnt.snapshot()
			r.stop(b)
			cnt.reset()
			r = startWorkers(b, base, cnt, ns, config, 2)
			r.settle(b, 0, n)
			sr.restart, _ = cnt.snapshot()
			r.stop(b)
			// The next run gets the plane as this one found it.
			deleteNamespace(ctx, b, admin, ns)
			return sr
		}

		// stencil writing as the tenant: the same config, the WebApps'
		// children written as each namespace's builder account
		// (identity: {tenant: builder}), which a Role lets write them.
		tenant := func(name string) run {
			labelRun(ctx, name)
			ns := fmt.Sprintf("bench-%s-%d", name, stamp)
			newNamespace(ctx, b, admin, ns)
			grantBuilder(ctx, b, admin, ns)
			config := tenantConfig(b)
			cnt := &counter{mutating: map[string]int{}}
			var accounts atomic.Int64
			cnt.onGet = func(r *http.Request, _ *http.Response) {
				if strings.Contains(r.URL.Path, "/serviceaccounts/") {
					accounts.Add(1)
				}
			}
			// As stencil run builds them: the dynamic client and the
			// impersonating ones share one rate limiter.
			cfg := rest.CopyConfig(base)
			cfg.Wrap(cnt.wrap)
			cfg.RateLimiter = controller.WriteLimiter(base)
			imp, err := controller.NewImpersonators(cfg)
			if err != nil {
				b.Fatal(err)
			}
			before := measure()
			r := startWith(b, base, cnt, ns, config, func(o *controller.Options) {
				o.Workers, o.Impersonate, o.Dynamic = 2, imp.Client, dynamic.NewForConfigOrDie(cfg)
			})
			w := watchReady(ctx, b, admin, ns, n)
			began := time.Now()
			createWebApps(ctx, b, admin, ns, n)
			ready := w.wait(b, "stencil as the tenant", 60*time.Minute).Sub(began)
			r.settle(b, 0, n)
			after := measure()
			writes, by := cnt.snapshot()
			events := by["POST events"] + by["PATCH events"]
			delete(by, "POST events")
			delete(by, "PATCH events")
			tr := run{name: name, ready: ready, written: cnt.lastWrite(childWrites...).Sub(began), by: by, writes: writes - events, reads: int(cnt.reads.Load()), events: events,
				heap: kib(after.heap, before.heap, n), rss: kib(after.rss, before.rss, n), cpu: after.cpu - before.cpu, plane: after.plane - before.plane, workers: after.workers - before.workers,
				syncs: r.counterValue(b, "stencil_reconcile_total"), renders: r.counterValue(b, "stencil_renders_total"),
				reused: r.counterValue(b, "stencil_renders_reused_total")}
			r.stop(b)
			b.Logf("%s: %d ServiceAccount reads (the identity's existence, cached 30 s), %d SubjectAccessReviews (WebApps read nothing a tenant names)",
				name, accounts.Load(), by["POST subjectaccessreviews"])
			deleteNamespace(ctx, b, admin, ns)
			return tr
		}

		// The floor, stencil, the floor, then each round a tenant run and
		// the floor: every run of stencil sits between two floors and is
		// compared with their mean.
		runs = append(runs, own(), floor("floor-1"))
		for i := range benchRounds(b) {
			runs = append(runs, tenant(fmt.Sprintf("tenant-%d", i+1)), floor(fmt.Sprintf("floor-%d", i+2)))
		}
		st := runs[1]
		floorReady := (runs[0].ready + runs[2].ready) / 2
		ratio := st.ready.Seconds() / floorReady.Seconds()
		var tenantRatios []float64
		for k := 3; k < len(runs); k += 2 {
			t, around := runs[k], (runs[k-1].ready+runs[k+1].ready)/2
			tenantRatios = append(tenantRatios, t.ready.Seconds()/around.Seconds())
			b.Logf("%s/floor time to all Ready: %.2fx (floor: the mean of %s and %s); %.2fx stencil's own run; %.2f requests per resource (stencil's own account: %.2f)",
				t.name, tenantRatios[len(tenantRatios)-1], runs[k-1].ready.Round(time.Millisecond), runs[k+1].ready.Round(time.Millisecond),
				t.ready.Seconds()/st.ready.Seconds(), float64(t.writes)/float64(n), float64(st.writes)/float64(n))
		}
		tenantRatio := median(tenantRatios)
		b.Logf("stencil as the tenant/floor time to all Ready, the median of %d rounds: %.2fx", len(tenantRatios), tenantRatio)
		b.ReportMetric(tenantRatio, "x-floor-tenant")
		for _, r := range runs {
			b.Logf("%-9s %d WebApps Ready in %s (the last child written at %s); %.2f requests per resource through its client (%s), %.2f reads per resource; %.2f events per resource; heap +%.1f KiB and RSS +%.1f KiB per resource; %.1f CPU s (%.1f of it in render workers), the plane %.1f CPU s; %.2f syncs and %.2f renders per resource (%.2f reused)",
				r.name, n, r.ready.Round(time.Millisecond), r.written.Round(time.Millisecond), float64(r.writes)/float64(n), r.perResource(n),
				float64(r.reads)/float64(n), float64(r.events)/float64(n), r.heap, r.rss, r.cpu.Seconds(), r.workers.Seconds(), r.plane.Seconds(),
				r.syncs/float64(n), r.renders/float64(n), r.reused/float64(n))
		}
		b.Logf("stencil/floor time to all Ready: %.2fx; stencil writes on resync %d, on restart %d", ratio, st.resync, st.restart)
		b.ReportMetric(float64(n), "CRs")
		b.ReportMetric(floorReady.Seconds(), "s-floor")
		b.ReportMetric(st.ready.Seconds(), "s-stencil")
		b.ReportMetric(ratio, "x-floor")
		b.ReportMetric(float64(st.writes)/float64(n), "requests/CR")
		b.ReportMetric(float64(st.resync), "resync-writes")
		b.ReportMetric(float64(st.restart), "restart-writes")
		b.ReportMetric(st.heap, "KiB-heap/CR")
	}
}

// BenchmarkDependsOn measures what children that depend on each other
// cost. N AppStacks of the example (crds/appstack: the app's template
// dependsOn the database's and reads its Service with observed; the status
// template reads the app's Service) are run against the same N AppStacks
// under the same templates without dependsOn and observed (the app renders
// at once, told the database Service's DNS name; the status names the app
// Service's), back to back on the same plane with 2 workers and 100 QPS.
// For each it prints the time from the first create to all N Ready, the
// requests per resource by verb and resource through its client (events
// apart), heap growth per resource, and the writes of a restart. Run it with
// make bench BENCH=DependsOn (STENCIL_BENCH_CRS sets N, default 1000).
func BenchmarkDependsOn(b *testing.B) {
	base := restConfig(b)
	base.QPS, base.Burst = 100, 150
	ctx := context.Background()
	admin := dynamic.NewForConfigOrDie(restConfig(b))
	installCRDs(ctx, b, admin)
	n := benchCRs(b)
	withDeps := filepath.Join(root, "crds", "stencil.yaml")
	without := editConfig(b, map[string]func(string) string{
		"stencil.yaml": func(s string) string { return strings.Replace(s, "        dependsOn: [db]\n", "", 1) },
		"appstack/app.yaml.tmpl": func(s string) string {
			return strings.Replace(s, `{{- $db := observed "Service" (printf "%s-db" .Name) -}}`,
				`{{- $db := dict "spec" (dict "clusterIP" (printf "%s-db" .Name)) -}}`, 1)
		},
		"appstack/status.yaml.tmpl": func(string) string {
			return "endpoint: {{ printf \"%s:%d\" .Name (get .Spec \"port\" 8080 | int64) | quote }}\n"
		},
	})
	spec := map[string]any{"image": "registry.k8s.io/pause:3.10", "replicas": int64(1)}

	for b.Loop() {
		stamp := time.Now().UnixNano() % 1000000
		var runs []run
		for _, c := range []struct{ name, config string }{{"without", without}, {"dependsOn", withDeps}} {
			ns := fmt.Sprintf("bench-%s-%d", strings.ToLower(c.name), stamp)
			newNamespace(ctx, b, admin, ns)
			cnt := &counter{mutating: map[string]int{}}
			before := measure()
			r := startWorkers(b, base, cnt, ns, c.config, 2)
			w := watchReadyOf(ctx, b, admin, appstacks, ns, n)
			began := time.Now()
			createResources(ctx, b, admin, appstacks, "AppStack", "stack", ns, n, spec)
			ready := w.wait(b, c.name, 60*time.Minute).Sub(began)
			r.settle(b, 0, n)
			after := measure()
			writes, by := cnt.snapshot()
			events := by["POST events"] + by["PATCH events"]
			delete(by, "POST events")
			delete(by, "PATCH events")
			rn := run{name: c.name, ready: ready, by: by, writes: writes - events, reads: int(cnt.reads.Load()), events: events,
				heap: kib(after.heap, before.heap, n), rss: kib(after.rss, before.rss, n), cpu: after.cpu - before.cpu, plane: after.plane - before.plane}
			r.stop(b)
			cnt.reset()
			r = startWorkers(b, base, cnt, ns, c.config, 2)
			r.settle(b, 0, n)
			rn.restart, _ = cnt.snapshot()
			r.stop(b)
			runs = append(runs, rn)
			deleteNamespace(ctx, b, admin, ns)
		}
		plain, deps := runs[0], runs[1]
		for _, r := range runs {
			b.Logf("%-9s %d AppStacks Ready in %s; %.2f requests per resource (%s), %.2f reads per resource, %.2f events per resource; heap +%.1f KiB per resource; %.1f CPU s; %d writes on restart",
				r.name, n, r.ready.Round(time.Millisecond), float64(r.writes)/float64(n), r.perResource(n),
				float64(r.reads)/float64(n), float64(r.events)/float64(n), r.heap, r.cpu.Seconds(), r.restart)
		}
		b.Logf("dependsOn/without time to all Ready: %.2fx; requests per resource %.2f against %.2f",
			deps.ready.Seconds()/plain.ready.Seconds(), float64(deps.writes)/float64(n), float64(plain.writes)/float64(n))
		b.ReportMetric(float64(n), "CRs")
		b.ReportMetric(plain.ready.Seconds(), "s-without")
		b.ReportMetric(deps.ready.Seconds(), "s-dependsOn")
		b.ReportMetric(float64(plain.writes)/float64(n), "requests/CR-without")
		b.ReportMetric(float64(deps.writes)/float64(n), "requests/CR-dependsOn")
		b.ReportMetric(float64(deps.restart), "restart-writes")
	}
}

// deleteNamespace deletes ns and waits until it and its objects are gone.
func deleteNamespace(ctx context.Context, b *testing.B, dyn dynamic.Interface, ns string) {
	if err := dyn.Resource(namespaceGVR).Delete(ctx, ns, metav1.DeleteOptions{}); err != nil {
		b.Fatal(err)
	}
	poll(b, 20*time.Minute, "namespace "+ns+" gone", func() (bool, error) {
		_, err := dyn.Resource(namespaceGVR).Get(ctx, ns, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	})
	waitQuiet(b)
}

// waitQuiet waits until the plane is quiet: its processes (planeCPU)
// under a tenth of a core for 3 seconds in a row, or 3 minutes passed.
// The namespace of a run is gone well before the plane is done with it
// (the controller manager's informers, etcd's compaction): a run started
// at once pays for the one before it, and the floors of one benchmark
// drifted from 34 s to 45 s run after run without it. Idle, the plane
// uses about 3% of a core.
func waitQuiet(b *testing.B) {
	start := time.Now()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	prev, quiet := planeCPU(), 0
	for quiet < 3 {
		if time.Since(start) > 3*time.Minute {
			b.Logf("the plane was not quiet after %s; going on", time.Since(start).Round(time.Second))
			return
		}
		<-tick.C
		now := planeCPU()
		if now-prev < 100*time.Millisecond {
			quiet++
		} else {
			quiet = 0
		}
		prev = now
	}
	b.Logf("the plane was quiet after %s", time.Since(start).Round(time.Second))
}

// writeHeapProfile writes the heap profile to $STENCIL_BENCH_HEAPPROFILE,
// when set, for go tool pprof: what stencil's converged caches hold.
// benchRounds is the number of tenant runs of BenchmarkConverge, each
// between two floors; STENCIL_BENCH_ROUNDS overrides it.
func benchRounds(b *testing.B) int { return positiveEnv(b, "STENCIL_BENCH_ROUNDS", 2) }

// median is the middle of xs (the mean of the two middle ones for an
// even count); xs is sorted in place.
func median(xs []float64) float64 {
	sort.Float64s(xs)
	m := len(xs) / 2
	if len(xs)%2 == 0 {
		return (xs[m-1] + xs[m]) / 2
	}
	return xs[m]
}

// labelRun labels this goroutine, and so every goroutine it starts (the
// run's informers, workers and clients), with the run's name, so that a
// -cpuprofile of the benchmark splits by run: go tool pprof -tagfocus
// run=tenant.
func labelRun(ctx context.Context, name string) {
	pprof.SetGoroutineLabels(pprof.WithLabels(ctx, pprof.Labels("run", name)))
}

func writeHeapProfile(b *testing.B) {
	path := os.Getenv("STENCIL_BENCH_HEAPPROFILE")
	if path == "" {
		return
	}
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if err := pprof.WriteHeapProfile(f); err != nil {
		b.Fatal(err)
	}
}

// childWrites are the requests that write a WebApp's children, as counter
// names them.
var childWrites = []string{"PATCH deployments", "PATCH services", "POST deployments", "POST services"}

// kib returns the growth from before to after in KiB per resource.
func kib(after, before uint64, n int) float64 {
	if after < before {
		return 0
	}
	return float64(after-before) / 1024 / float64(n)
}

// tenantConfig writes the example config with identity: {tenant: builder}
// on the WebApp entry, beside it (its templates are relative to it), and
// returns its path.
func tenantConfig(b testing.TB) string {
	b.Helper()
	data, err := os.ReadFile(filepath.Join(root, "crds", "stencil.yaml"))
	if err != nil {
		b.Fatal(err)
	}
	text := strings.Replace(string(data), "    resource: webapps ", "    identity: {tenant: builder}\n    resource: webapps ", 1)
	if text == string(data) {
		b.Fatal("crds/stencil.yaml: no webapps entry to give an identity")
	}
	path := filepath.Join(root, "crds", fmt.Sprintf(".bench-tenant-%d.yaml", os.Getpid()))
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.Remove(path) })
	return path
}

// grantBuilder creates the ServiceAccount builder in ns and a Role, bound
// to it, that writes the WebApp entry's child kinds and may set
// blockOwnerDeletion on WebApps (update on webapps/finalizers).
func grantBuilder(ctx context.Context, b testing.TB, admin dynamic.Interface, ns string) {
	b.Helper()
	sa := schema.GroupVersionResource{Version: "v1", Resource: "serviceaccounts"}
	roles := schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "roles"}
	bindings := schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "rolebindings"}
	write := []any{"get", "list", "watch", "create", "patch", "delete"}
	for _, o := range []struct {
		gvr schema.GroupVersionResource
		obj map[string]any
	}{
		{sa, map[string]any{"apiVersion": "v1", "kind": "ServiceAccount", "metadata": map[string]any{"name": "builder", "namespace": ns}}},
		{roles, map[string]any{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": map[string]any{"name": "builder", "namespace": ns},
			"rules": []any{
				map[string]any{"apiGroups": []any{"apps"}, "resources": []any{"deployments"}, "verbs": write},
				map[string]any{"apiGroups": []any{""}, "resources": []any{"services", "configmaps"}, "verbs": write},
				map[string]any{"apiGroups": []any{"policy"}, "resources": []any{"poddisruptionbudgets"}, "verbs": write},
				map[string]any{"apiGroups": []any{"autoscaling"}, "resources": []any{"horizontalpodautoscalers"}, "verbs": write},
				map[string]any{"apiGroups": []any{"apps.example.com"}, "resources": []any{"webapps/finalizers"}, "verbs": []any{"update"}},
			}}},
		{bindings, map[string]any{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": map[string]any{"name": "builder", "namespace": ns},
			"roleRef":  map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "builder"},
			"subjects": []any{map[string]any{"kind": "ServiceAccount", "name": "builder", "namespace": ns}}}},
	} {
		if _, err := createOnce(ctx, admin.Resource(o.gvr).Namespace(ns), &unstructured.Unstructured{Object: o.obj}); err != nil {
			b.Fatal(err)
		}
	}
}
