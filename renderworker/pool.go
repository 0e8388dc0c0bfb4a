package renderworker

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/klog/v2"

	"stencil.dev/stencil/templates"
	"stencil.dev/stencil/templates/budget"
	"stencil.dev/stencil/templates/engine"
	"stencil.dev/stencil/templates/view"
)

// killGrace is how long past a render's timeoutSeconds the controller
// waits before it kills the worker: the budget's own clock stops a render
// at its next step with a message naming the line; the kill is for a
// render stuck inside one call.
const killGrace = 500 * time.Millisecond

// demoteAfter is how much CPU a render uses at the controller's priority,
// counted from its first check (checkEvery after it starts):
// past it, its worker runs at the lowest (nice 19), so that a tenant's
// costly render takes from the others only what the CPU has spare. CPU
// time, not wall time: on a busy machine a benign render of a few
// milliseconds can wait far longer for a core. checkEvery is how often
// it is looked at.
const (
	demoteAfter = 150 * time.Millisecond
	checkEvery  = 100 * time.Millisecond
)

// resultsPerObject is how many objects of renderBudget.stringBytes one
// render's result may hold at the pipe: the render's output bound.
const resultsPerObject = 4

// diagnosticsBytes is how much of a worker's stderr is kept: the first
// lines, where the runtime writes "fatal error: ..." or "panic: ...".
const diagnosticsBytes = 16 << 10

// Options tunes a Pool.
type Options struct {
	// Size is the most worker processes alive at once (run's --workers):
	// as many renders as reconciles can run at once.
	Size int
	// Executable is the workers' binary; empty: this process's own
	// (os.Executable), which serves when IsWorker.
	Executable string
	// StartTimeout bounds a worker's start, its config load included
	// (default 60s).
	StartTimeout time.Duration
	// Logger logs workers that die and the bounds they hit.
	Logger klog.Logger
	// Metrics, when set, counts workers, restarts and kills.
	Metrics *Metrics
	// Env is added to the workers' environment (this process's).
	Env []string
	// MemoBytes bounds the memo of renders (memo.go): 16 MiB when 0,
	// none when negative. MemoTTL is how long an entry is kept at least
	// after its last use (2 minutes when 0); at most twice that.
	MemoBytes int
	MemoTTL   time.Duration
}

// SetSlow sets what the pool tells when a render goes slow (demoteAfter)
// and its worker yields the CPU: slow is called then, and the func it
// returns when the render ends. The controller lends such a render's
// reconcile slot to the rest of its queue meanwhile. Set it before the
// first render.
func (p *Pool) SetSlow(slow func() (done func())) { p.slow = slow }

// Pool runs renders in worker processes: the wall of DESIGN.md's "A
// budget for every render, and a wall around it". Attach gives it a
// config's sets; each set then renders through it. It is safe for
// concurrent use.
type Pool struct {
	opts Options
	mu   sync.Mutex
	cond *sync.Cond
	// alive counts worker processes, busy or idle; idle holds those
	// waiting for a render.
	alive  int
	idle   []*worker
	closed bool
	// lent counts the slow renders' workers that gave their place up
	// (at most Size): they run out their render beside the pool.
	lent int
	slow func() (done func())
	// current is the generation last made Current: a worker of another
	// is not kept idle after its render.
	current *generation
	// generations numbers the generations, for the memo's keys.
	generations uint64
	// memo answers a request the same as a recent one; nil: none.
	memo *memo
}

// Available reports whether renders can be walled here (Linux: RLIMIT_AS
// and RLIMIT_CPU); where not, stencil renders in its own process under
// the budget alone, and says so once at start.
func Available() bool { return kernelBounds }

// NewWall returns a pool of at most size render workers for a command
// that renders; where the kernel's bounds are not available it says so
// once, through logger, and returns nil: renders then run in the calling
// process under the render budget alone. reg, when set, gets the pool's
// metrics.
func NewWall(size int, logger klog.Logger, reg prometheus.Registerer) *Pool {
	opts := Options{Size: size, Logger: logger}
	if reg != nil {
		opts.Metrics = NewMetrics(reg)
	}
	p, err := NewPool(opts)
	if err != nil {
		logger.Info("Renders run in this process, under the render budget alone, without the kernel's bounds", "reason", err.Error())
		return nil
	}
	return p
}

// NewPool returns a pool of at most opts.Size workers, started as renders
// need them.
func NewPool(opts Options) (*Pool, error) {
	if !kernelBounds {
		return nil, errors.New("render workers need Linux's RLIMIT_AS and RLIMIT_CPU")
	}
	if opts.Size < 1 {
		opts.Size = 1
	}
	if opts.StartTimeout <= 0 {
		opts.StartTimeout = 60 * time.Second
	}
	if opts.Executable == "" {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("finding stencil's own binary for its render workers: %w", err)
		}
		opts.Executable = exe
	}
	p := &Pool{opts: opts, memo: newMemo(opts.MemoBytes, opts.MemoTTL)}
	p.cond = sync.NewCond(&p.mu)
	return p, nil
}

// Attach makes every set render through the pool, in workers that
// compile the snapshot h holds: a generation of the config. Workers of an
// earlier generation finish the render they run and are not given another
// once a render of this one needs their place; Current stops them sooner.
func (p *Pool) Attach(h Hello, sets []*templates.Set) {
	h.Version = protocolVersion
	p.mu.Lock()
	p.generations++
	g := &generation{pool: p, hello: h, id: p.generations}
	p.mu.Unlock()
	for _, s := range sets {
		s.SetWall(g)
	}
}

// Current says the sets' generation is the one the controller now runs
// (a reload was committed): the idle workers of every other generation
// stop now, and a busy one when its render ends, instead of lingering
// until their place is needed.
func (p *Pool) Current(sets []*templates.Set) {
	var g *generation
	for _, s := range sets {
		if sg, ok := s.Wall().(*generation); ok && sg.pool == p {
			g = sg
			break
		}
	}
	if g == nil {
		return
	}
	p.mu.Lock()
	p.current = g
	var old []*worker
	keep := p.idle[:0]
	for _, w := range p.idle {
		if w.gen == g {
			keep = append(keep, w)
		} else {
			old = append(old, w)
		}
	}
	p.idle = keep
	p.alive -= len(old)
	p.cond.Broadcast()
	p.mu.Unlock()
	for _, w := range old {
		go w.stop()
	}
	p.gauge()
}

// Close stops the idle workers; a busy one stops when its render ends.
func (p *Pool) Close() {
	p.mu.Lock()
	p.closed = true
	idle := p.idle
	p.idle = nil
	p.alive -= len(idle)
	p.cond.Broadcast()
	p.mu.Unlock()
	for _, w := range idle {
		w.stop()
	}
	p.gauge()
}

func (p *Pool) gauge() {
	if p.opts.Metrics == nil {
		return
	}
	p.mu.Lock()
	n := p.alive + p.lent
	p.mu.Unlock()
	p.opts.Metrics.workers.Set(float64(n))
}

// generation is one config's sets as the workers load them: the
// templates.Wall of each set.
type generation struct {
	pool  *Pool
	hello Hello
	// id is its number in the pool: what the memo's keys begin with.
	id uint64
}

// Render renders parent in a worker of g's config. A worker lost to
// something outside the render (a signal stencil did not send: the node's
// OOM killer, a person) is not the render's doing: the render runs once
// more in another worker, and only a second loss in a row is returned
// (templates.ErrWorkerLost, transient).
//
// A request the same as one that rendered within the memo's time (memo.go)
// is answered with that render's result, decoded again, without a worker.
func (g *generation) Render(s *templates.Set, parent *view.Object, live templates.Live) (*templates.Result, error) {
	p := g.pool
	b := s.Budget()
	pv, err := toWire(parent)
	if err != nil {
		return nil, &engine.RenderError{Err: fmt.Errorf("reading the resource: %w", err)}
	}
	req := request{Snapshot: g.hello.Snapshot.Digest, GVR: s.Resource().GVR().String(), Parent: pv, Live: live != nil, CPUSeconds: b.TimeoutSeconds, MemoryMiB: b.MemoryMiB}
	payload, err := requestFrame(req)
	if err != nil {
		return nil, &engine.RenderError{Err: fmt.Errorf("encoding the request: %w", err)}
	}
	var key memoKey
	kept := p.memo != nil && live == nil
	if kept {
		key = keyOf(g.id, payload)
		if body, ok := p.memo.get(key); ok {
			res, err := parseResult(body)
			var r *templates.Result
			if err == nil {
				r, err = fromResult(res, b)
			}
			if err == nil {
				p.count(func(m *Metrics) { m.reused.Inc() })
				return r, nil
			}
		}
	}
	for attempt := 0; ; attempt++ {
		w, err := p.acquire(g)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", templates.ErrWallDown, err)
		}
		r, body, keep, err := w.render(s, payload, live)
		p.release(w, keep)
		if attempt == 0 && errors.Is(err, templates.ErrWorkerLost) {
			continue
		}
		if kept && err == nil && body != nil {
			p.memo.put(key, body)
		}
		return r, err
	}
}

// acquire returns an idle worker of g, or starts one.
func (p *Pool) acquire(g *generation) (*worker, error) {
	p.mu.Lock()
	for {
		if p.closed {
			p.mu.Unlock()
			return nil, errors.New("the render pool is closed")
		}
		for i, w := range p.idle {
			if w.gen == g {
				p.idle = append(p.idle[:i], p.idle[i+1:]...)
				p.mu.Unlock()
				return w, nil
			}
		}
		if p.alive < p.opts.Size {
			p.alive++
			p.mu.Unlock()
			p.gauge()
			w, err := p.start(g)
			if err != nil {
				p.mu.Lock()
				p.alive--
				p.cond.Signal()
				p.mu.Unlock()
				p.gauge()
				return nil, err
			}
			return w, nil
		}
		if len(p.idle) > 0 {
			// A worker of another generation makes room.
			old := p.idle[0]
			p.idle = p.idle[1:]
			p.alive--
			go old.stop()
			continue
		}
		p.cond.Wait()
	}
}

// release takes w back; a worker that died or retired (keep false) frees
// its place.
func (p *Pool) release(w *worker, keep bool) {
	p.mu.Lock()
	if w.lent {
		// Its place was taken back when it went slow.
		p.lent--
		keep = false
	}
	// A worker whose generation was replaced while it rendered is not
	// kept either.
	replaced := p.current != nil && w.gen != p.current
	if !keep || p.closed || replaced {
		if !w.lent {
			p.alive--
		}
		p.cond.Signal()
		p.mu.Unlock()
		if keep {
			w.stop()
		} else {
			go w.reap()
		}
		p.gauge()
		return
	}
	p.idle = append(p.idle, w)
	p.cond.Signal()
	p.mu.Unlock()
}

// worker is one worker process and its pipes.
type worker struct {
	gen  *generation
	cmd  *exec.Cmd
	in   *os.File // its requests (the worker's fd 3)
	out  *os.File // its results (the worker's fd 4)
	diag *headWriter
	// killed says the controller killed it at a render's deadline.
	killed atomic.Bool
	// mu guards what a render's demotion (demoteAfter) sets: demoted
	// (it runs at the lowest priority), lent (it gave its place in the
	// pool up) and slowDone; finished says the render ended, after
	// which it is not demoted.
	mu       sync.Mutex
	demoted  bool
	lent     bool
	finished bool
	// reaped says the process was (or is being) waited for: its id may
	// name another process now.
	reaped   bool
	slowDone func()
	waitOnce sync.Once
	waitErr  error
}

// start starts a worker for g and waits until it has loaded g's config.
func (p *Pool) start(g *generation) (*worker, error) {
	reqR, reqW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	resR, resW, err := os.Pipe()
	if err != nil {
		reqR.Close()
		reqW.Close()
		return nil, err
	}
	diag := &headWriter{limit: diagnosticsBytes}
	cmd := exec.Command(p.opts.Executable)
	// The snapshot's digest in its environment names the config it
	// serves to anyone who looks (/proc/PID/environ).
	cmd.Env = append(append(os.Environ(), p.opts.Env...), envWorker+"=1", EnvSnapshot+"="+g.hello.Snapshot.Digest)
	cmd.ExtraFiles = []*os.File{reqR, resW}
	cmd.Stdout, cmd.Stderr = diag, diag
	cmd.SysProcAttr = sysProcAttr()
	err = cmd.Start()
	reqR.Close()
	resW.Close()
	if err != nil {
		reqW.Close()
		resR.Close()
		return nil, fmt.Errorf("starting a render worker: %w", err)
	}
	w := &worker{gen: g, cmd: cmd, in: reqW, out: resR, diag: diag}
	p.count(func(m *Metrics) { m.starts.Inc() })
	timer := time.AfterFunc(p.opts.StartTimeout, func() { w.kill() })
	defer timer.Stop()
	if err := writeJSON(w.in, kindHello, g.hello); err != nil {
		return nil, w.failStart(fmt.Errorf("sending its config: %w", err))
	}
	kind, body, err := readFrame(w.out, func(byte) int64 { return maxSmallFrame })
	if err != nil || kind != kindReady {
		return nil, w.failStart(fmt.Errorf("waiting for it to load the config: frame %q: %v", kind, err))
	}
	var r ready
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, w.failStart(err)
	}
	if r.Error != "" {
		return nil, w.failStart(errors.New(r.Error))
	}
	return w, nil
}

// failStart stops a worker that did not start and says why.
func (w *worker) failStart(err error) error {
	w.kill()
	w.reap()
	if d := w.diag.firstLine(); d != "" {
		return fmt.Errorf("render worker: %w (it printed: %s)", err, d)
	}
	return fmt.Errorf("render worker: %w", err)
}

func (p *Pool) count(f func(m *Metrics)) {
	if p.opts.Metrics != nil {
		f(p.opts.Metrics)
	}
}

// kill kills the process; reap collects it.
func (w *worker) kill() { _ = w.cmd.Process.Kill() }

// reap closes the pipes and waits for the process to end. It marks the
// worker reaped first, under mu: demote, which holds mu while it renices
// the process id, then either ran before the process was reaped (its id
// still names it, a zombie at worst) or does nothing, so that a recycled
// process id is never reniced.
func (w *worker) reap() error {
	w.mu.Lock()
	w.reaped = true
	w.mu.Unlock()
	w.waitOnce.Do(func() {
		w.in.Close()
		w.waitErr = w.cmd.Wait()
		w.out.Close()
	})
	return w.waitErr
}

// stop ends an idle worker: its request pipe closes, and it exits.
func (w *worker) stop() {
	w.in.Close()
	done := make(chan struct{})
	go func() { w.reap(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		w.kill()
		<-done
	}
}

// render runs one render, of the request frame payload, on w; body is
// the worker's result frame (nil when it gave none). keep is false when w
// died or retired.
func (w *worker) render(s *templates.Set, payload []byte, live templates.Live) (*templates.Result, []byte, bool, error) {
	b := s.Budget()
	// A worker kept after a render starts the next one not finished: a
	// slow render on a reused worker is demoted as on a new one.
	w.mu.Lock()
	w.finished = false
	w.mu.Unlock()
	timer := time.AfterFunc(time.Duration(b.TimeoutSeconds)*time.Second+killGrace, func() {
		w.killed.Store(true)
		w.kill()
	})
	defer timer.Stop()
	// A render that used demoteAfter of CPU is not a benign one (those
	// take a few milliseconds): its worker yields the CPU to the others
	// for the rest of it, and retires after (a process cannot raise its
	// priority back).
	// The CPU is first read at the first check, not here: most renders
	// end before it, and a /proc read per render would cost them.
	startCPU := time.Duration(-1)
	var demote *time.Timer
	var demoteMu sync.Mutex
	demoteMu.Lock()
	defer func() {
		demoteMu.Lock()
		demote.Stop()
		demoteMu.Unlock()
	}()
	demote = time.AfterFunc(checkEvery, func() {
		now := cpuTime(w.cmd.Process.Pid)
		if startCPU < 0 {
			startCPU = now
		} else if now-startCPU >= demoteAfter {
			w.demote()
			return
		}
		demoteMu.Lock()
		defer demoteMu.Unlock()
		demote.Reset(checkEvery)
	})
	demoteMu.Unlock()
	finish := func() bool {
		demoteMu.Lock()
		demote.Stop()
		demoteMu.Unlock()
		w.mu.Lock()
		w.finished = true
		demoted, done := w.demoted, w.slowDone
		w.slowDone = nil
		w.mu.Unlock()
		if done != nil {
			done()
		}
		return demoted
	}
	defer finish()
	template := ""
	if s.Chart() != nil {
		template = s.Resource().Chart
	}
	resultBound := resultsPerObject*b.StringBytes + maxSmallFrame
	limit := func(kind byte) int64 {
		switch kind {
		case kindResult:
			return resultBound
		case kindQuestion:
			return b.StringBytes + maxSmallFrame
		}
		return maxSmallFrame
	}
	if err := writeFrame(w.in, kindRequest, payload); err != nil {
		return nil, nil, false, w.died(b, template, err)
	}
	for {
		kind, body, err := readFrame(w.out, limit)
		if err != nil {
			var tl *errTooLarge
			if errors.As(err, &tl) {
				w.kill()
				w.reap()
				w.gen.pool.count(func(m *Metrics) {
					m.killed.WithLabelValues(reasonOutput).Inc()
					m.exits.WithLabelValues(reasonOutput).Inc()
				})
				return nil, nil, false, &engine.RenderError{Template: template, Err: &KilledError{Reason: reasonOutput,
					Bound: fmt.Sprintf("its result, %d bytes, is over the output bound of %d (%d times renderBudget.stringBytes)", tl.size, tl.limit, resultsPerObject)}}
			}
			return nil, nil, false, w.died(b, template, err)
		}
		switch kind {
		case kindTemplate:
			template = string(body)
		case kindQuestion:
			if err := w.answer(body, live); err != nil {
				return nil, nil, false, w.died(b, template, err)
			}
		case kindResult:
			res, err := parseResult(body)
			if err != nil {
				w.kill()
				return nil, nil, false, &engine.RenderError{Template: template, Err: fmt.Errorf("reading the render worker's result: %w", err)}
			}
			r, err := fromResult(res, b)
			if !timer.Stop() {
				// Killed as it answered: the answer stands, the worker
				// does not.
				w.reap()
				return r, body, false, err
			}
			retire := finish() || res.Retire
			if retire {
				w.gen.pool.count(func(m *Metrics) { m.exits.WithLabelValues(reasonRetired).Inc() })
			}
			return r, body, !retire, err
		default:
			w.kill()
			return nil, nil, false, w.died(b, template, fmt.Errorf("unexpected frame %q", kind))
		}
	}
}

// demote lowers a slow render's worker to the lowest priority, gives its
// place in the pool up (so that a quick render need not wait for it; at
// most Size at once) and tells the pool's slow hook.
func (w *worker) demote() {
	p := w.gen.pool
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.finished || w.reaped || lowerPriority(w.cmd.Process.Pid) != nil {
		return
	}
	w.demoted = true
	p.mu.Lock()
	if p.lent < p.opts.Size {
		p.lent++
		p.alive--
		w.lent = true
		p.cond.Signal()
	}
	p.mu.Unlock()
	if w.lent && p.slow != nil {
		w.slowDone = p.slow()
	}
}

// answer answers a worker's question about a live child.
func (w *worker) answer(body []byte, live templates.Live) error {
	var q question
	if err := json.Unmarshal(body, &q); err != nil {
		return err
	}
	var a answer
	if live != nil {
		if u, ok := live.Child(q.Kind, q.Name); ok {
			switch q.Op {
			case "child":
				obj, err := encodeValue(u.Object)
				if err != nil {
					return err
				}
				a = answer{Found: true, Object: obj, Ready: live.Ready(u)}
			case "current":
				want, err := decodeMap(q.Want)
				if err != nil {
					return err
				}
				a.Yes = live.Current(&unstructured.Unstructured{Object: want}, u)
			}
		}
	}
	return writeFrame(w.in, kindAnswer, answerFrame(a))
}

// Reasons a worker ends, the label of stencil_render_worker_exits_total
// and (but retired) of stencil_renders_killed_total.
const (
	reasonDeadline = "deadline"
	reasonCPU      = "cpu"
	reasonMemory   = "memory"
	reasonStack    = "stack"
	reasonPanic    = "panic"
	reasonCrash    = "crash"
	reasonOutput   = "output"
	reasonRetired  = "retired"
	// reasonLost: lost from outside the render (LostError), an exit
	// reason only: no render is blamed for it.
	reasonLost = "lost"
)

// KilledError is a render whose worker died: the bound it hit, or what
// ended it.
type KilledError struct {
	// Reason is deadline, cpu, memory, stack, panic, crash or output.
	Reason string
	// Bound says which bound, with its value, or what the worker printed.
	Bound string
}

// Error reads "render worker killed: it hit its memory bound (RLIMIT_AS, renderBudget.memoryMiB 512 MiB)".
func (e *KilledError) Error() string { return "render worker killed: " + e.Bound }

// Is makes a KilledError templates.ErrRenderKilled.
func (e *KilledError) Is(target error) bool { return target == templates.ErrRenderKilled }

// died collects a worker that stopped answering and says what ended it:
// a bound of stencil's or the render's own failure (RenderKilled), or a
// loss from outside the render (LostError, transient).
func (w *worker) died(b budget.Limits, template string, cause error) error {
	w.in.Close()
	werr := w.reap()
	ke := w.classify(b, werr)
	if ke.Reason == reasonLost {
		w.gen.pool.count(func(m *Metrics) { m.exits.WithLabelValues(reasonLost).Inc() })
		w.gen.pool.opts.Logger.Info("Render worker lost from outside the render; the render is retried", "template", template, "cause", ke.Bound, "pipe", cause, "exit", werr)
		return &engine.RenderError{Template: template, Err: &LostError{Cause: ke.Bound}}
	}
	w.gen.pool.count(func(m *Metrics) { m.killed.WithLabelValues(ke.Reason).Inc(); m.exits.WithLabelValues(ke.Reason).Inc() })
	w.gen.pool.opts.Logger.Info("Render worker died", "template", template, "reason", ke.Reason, "bound", ke.Bound, "pipe", cause, "exit", werr)
	return &engine.RenderError{Template: template, Err: ke}
}

// LostError is a render whose worker was lost to something outside the
// render and stencil's bounds: a signal stencil did not send, or an exit
// without a runtime error. It is templates.ErrWorkerLost: transient,
// retried, never the resource's RenderKilled.
type LostError struct {
	// Cause says how the worker ended, e.g. "signal: killed".
	Cause string
}

// Error reads "render worker lost: signal: killed (not by stencil)".
func (e *LostError) Error() string {
	return "render worker lost: " + e.Cause + " (not by stencil, nor a bound of the render; retried)"
}

// Is makes a LostError templates.ErrWorkerLost.
func (e *LostError) Is(target error) bool { return target == templates.ErrWorkerLost }

// classify names what ended a worker from how it exited and what it
// printed first.
func (w *worker) classify(b budget.Limits, werr error) *KilledError {
	diag := w.diag.String()
	var ee *exec.ExitError
	code, sig := 0, syscall.Signal(0)
	if errors.As(werr, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok {
			code = ws.ExitStatus()
			if ws.Signaled() {
				sig = ws.Signal()
			}
		}
	}
	switch {
	case w.killed.Load():
		return &KilledError{Reason: reasonDeadline, Bound: fmt.Sprintf("it ran past its deadline (renderBudget.timeoutSeconds %ds)", b.TimeoutSeconds)}
	case code == exitCPU || sig == syscall.SIGXCPU:
		return &KilledError{Reason: reasonCPU, Bound: fmt.Sprintf("it used up its CPU time (RLIMIT_CPU, renderBudget.timeoutSeconds %ds)", b.TimeoutSeconds)}
	case outOfMemory(diag):
		return &KilledError{Reason: reasonMemory, Bound: fmt.Sprintf("it hit its memory bound (RLIMIT_AS, renderBudget.memoryMiB %d MiB)", b.MemoryMiB)}
	case strings.Contains(diag, "stack exceeds") || strings.Contains(diag, "stack overflow"):
		return &KilledError{Reason: reasonStack, Bound: "it overflowed its stack (" + firstLine(diag, "fatal error:") + ")"}
	case strings.Contains(diag, "panic:"):
		return &KilledError{Reason: reasonPanic, Bound: "it panicked (" + firstLine(diag, "panic:") + ")"}
	}
	what := "its exit"
	if werr != nil {
		what = werr.Error()
	}
	if l := w.diag.firstLine(); l != "" {
		what += ": " + l
	}
	if sig != 0 || (code != exitProtocol && strings.TrimSpace(diag) == "") {
		// A signal stencil did not send (its own kills, at the deadline
		// and the output bound, are told apart above, and SIGXCPU is the
		// CPU bound's), or an exit that printed nothing: nothing the
		// render did.
		return &KilledError{Reason: reasonLost, Bound: what}
	}
	return &KilledError{Reason: reasonCrash, Bound: "it crashed (" + what + ")"}
}

// fromResult turns a worker's result into what RenderWith returns.
func fromResult(res result, b budget.Limits) (*templates.Result, error) {
	if len(res.Errors) > 0 {
		errs := make([]error, len(res.Errors))
		for i, we := range res.Errors {
			var inner error = errors.New(we.Message)
			if we.Budget {
				inner = budgetError{inner}
			}
			// Every failure a worker reports is a render error, one
			// outside any template (a spec too deep to decode) included.
			errs[i] = &engine.RenderError{Template: we.Template, Line: we.Line, Err: inner}
		}
		return nil, errors.Join(errs...)
	}
	r := &templates.Result{StatusWaits: res.StatusWaits, Waits: res.Waits, Release: res.Release, Hooks: res.Hooks, Notes: res.Notes, Dropped: res.Dropped}
	// Counted before anything is decoded: the worker refuses such a
	// result itself, and this process does not take its word for it.
	nodes := jsonNodes(res.Status)
	for _, raw := range res.Children {
		nodes += jsonNodes(raw)
	}
	if nodes > b.ResultNodes {
		return nil, &engine.RenderError{Err: budgetError{fmt.Errorf("the render's result holds %d values, more than renderBudget.resultNodes (%d)", nodes, b.ResultNodes)}}
	}
	for i, raw := range res.Children {
		if int64(len(raw)) > b.StringBytes {
			return nil, &engine.RenderError{Err: fmt.Errorf("rendered object %d is %d bytes, over renderBudget.stringBytes (%d)", i+1, len(raw), b.StringBytes)}
		}
		m, err := decodeMap(raw)
		if err != nil {
			return nil, &engine.RenderError{Err: fmt.Errorf("reading rendered object %d: %w", i+1, err)}
		}
		r.Children = append(r.Children, &unstructured.Unstructured{Object: m})
	}
	if len(res.Status) > 0 {
		m, err := decodeMap(res.Status)
		if err != nil {
			return nil, &engine.RenderError{Err: fmt.Errorf("reading the rendered status: %w", err)}
		}
		r.Status = m
	}
	return r, nil
}

// budgetError is a worker's budget error: budget.ErrExceeded, as it was
// in the worker.
type budgetError struct{ error }

func (e budgetError) Is(target error) bool { return target == budget.ErrExceeded }

func (e budgetError) Unwrap() error { return e.error }

// headWriter keeps the first limit bytes written to it and drops the rest.
type headWriter struct {
	mu    sync.Mutex
	limit int
	buf   []byte
}

func (h *headWriter) Write(p []byte) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if room := h.limit - len(h.buf); room > 0 {
		h.buf = append(h.buf, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

func (h *headWriter) String() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return string(h.buf)
}

// firstLine is the first non-empty line the worker printed.
func (h *headWriter) firstLine() string { return firstLine(h.String(), "") }

// outOfMemory reports whether a worker's diagnostics say it ran out of
// address space: Go's "out of memory", an mmap's ENOMEM, or the race
// detector's shadow memory that could not be mapped (a test build).
func outOfMemory(diag string) bool {
	for _, s := range []string{"out of memory", "cannot allocate memory", "address space collisions", "failed to allocate", "ThreadSanitizer failed to mmap",
		// A thread's stack that cannot be mapped: pthread_create's EAGAIN.
		"pthread_create failed"} {
		if strings.Contains(diag, s) {
			return true
		}
	}
	return false
}

// firstLine returns the first line of s that starts with prefix.
func firstLine(s, prefix string) string {
	for l := range strings.Lines(s) {
		l = strings.TrimSpace(l)
		if l != "" && strings.HasPrefix(l, prefix) {
			return l
		}
	}
	return ""
}

var _ io.Writer = (*headWriter)(nil)

// Metrics are the pool's collectors.
type Metrics struct {
	workers prometheus.Gauge
	starts  prometheus.Counter
	exits   *prometheus.CounterVec
	killed  *prometheus.CounterVec
	reused  prometheus.Counter
}

// Killed is the counter of renders killed for reason.
func (m *Metrics) Killed(reason string) prometheus.Counter { return m.killed.WithLabelValues(reason) }

// NewMetrics creates the pool's collectors and registers them on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		workers: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "stencil_render_workers", Help: "Render worker processes alive, busy or idle.",
		}),
		starts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "stencil_render_worker_starts_total", Help: "Render worker processes started.",
		}),
		exits: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "stencil_render_worker_exits_total", Help: "Render workers that ended during a render, by reason: deadline, cpu, memory, stack, panic, crash, output, retired (its address space grew, or a long render lowered its priority), or lost (a signal stencil did not send, such as the OOM killer's: the render is retried, not blamed).",
		}, []string{"reason"}),
		reused: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "stencil_renders_reused_total", Help: "Renders answered, without a worker, with the result of the same request (config, resource, reads) rendered in the last minutes.",
		}),
		killed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "stencil_renders_killed_total", Help: "Renders that killed their worker, by the bound hit: deadline, cpu, memory, stack, panic, crash, output.",
		}, []string{"reason"}),
	}
	for _, r := range []string{reasonDeadline, reasonCPU, reasonMemory, reasonStack, reasonPanic, reasonCrash, reasonOutput} {
		m.killed.WithLabelValues(r)
		m.exits.WithLabelValues(r)
	}
	m.exits.WithLabelValues(reasonRetired)
	m.exits.WithLabelValues(reasonLost)
	reg.MustRegister(m.workers, m.starts, m.exits, m.killed, m.reused)
	return m
}
