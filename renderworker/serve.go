package renderworker

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"syscall"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"stencil.dev/stencil/templates"
	"stencil.dev/stencil/templates/budget"
	"stencil.dev/stencil/templates/engine"
)

// envWorker marks a process started as a render worker: the same binary,
// which checks it first thing (IsWorker) and serves instead of running
// its command line.
const envWorker = "STENCIL_RENDER_WORKER"

// EnvSnapshot is set in a worker's environment to the digest of the
// config snapshot it serves (snapshot.Snapshot.Digest): how a person or a
// test tells which config a worker process renders.
const EnvSnapshot = "STENCIL_RENDER_SNAPSHOT"

// Exit statuses of a worker.
const (
	exitCPU      = 3 // its CPU-time bound (RLIMIT_CPU) was hit: SIGXCPU
	exitProtocol = 4 // the controller sent what it cannot read
)

// retireGrowthMiB is how far a worker's resident memory may stay above
// what it held once loaded before it exits after a render: what a large
// render left behind is given back to the system by the worker's exit.
const retireGrowthMiB = 64

// LoadFunc compiles what Hello holds: the sets of the config snapshot, by
// entry, as the controller compiled them. It reads no file.
type LoadFunc func(h Hello) (sets []*templates.Set, err error)

// IsWorker reports whether this process was started as a render worker.
func IsWorker() bool { return os.Getenv(envWorker) == "1" }

// Serve is a render worker's main: it loads the config Hello names with
// load, sets its kernel bounds, then renders one request at a time until
// the controller closes its pipe. It returns the process's exit status.
func Serve(load LoadFunc) int {
	in, results := os.NewFile(3, "requests"), os.NewFile(4, "results")
	if in == nil || results == nil {
		fmt.Fprintln(os.Stderr, "render worker: fds 3 and 4 are not open (a worker is started by stencil, not by hand)")
		return exitProtocol
	}
	// Anything a library prints to stdout goes to the diagnostics, never
	// into the protocol.
	os.Stdout = os.Stderr
	// One frame is one Write (writeFrame), and a render's template
	// reports come from another goroutine: the lock keeps frames whole.
	return serve(in, &lockedWriter{w: results}, load)
}

func serve(in io.Reader, out io.Writer, load LoadFunc) int {
	small := func(byte) int64 { return 1 << 30 }
	kind, body, err := readFrame(in, small)
	if err != nil || kind != kindHello {
		fmt.Fprintf(os.Stderr, "render worker: no hello: kind %q, %v\n", kind, err)
		return exitProtocol
	}
	var h Hello
	if err := json.Unmarshal(body, &h); err != nil {
		fmt.Fprintf(os.Stderr, "render worker: hello: %v\n", err)
		return exitProtocol
	}
	if h.Version != protocolVersion {
		_ = writeJSON(out, kindReady, ready{Error: fmt.Sprintf("protocol version %d, the controller speaks %d (a different binary)", protocolVersion, h.Version)})
		return exitProtocol
	}
	if h.Snapshot == nil {
		_ = writeJSON(out, kindReady, ready{Error: "the hello holds no config snapshot"})
		return exitProtocol
	}
	if err := h.Snapshot.Verify(); err != nil {
		_ = writeJSON(out, kindReady, ready{Error: err.Error()})
		return exitProtocol
	}
	sets, err := load(h)
	if err != nil {
		_ = writeJSON(out, kindReady, ready{Error: err.Error()})
		return 1
	}
	digest := h.Snapshot.Digest
	// The snapshot's bytes are compiled into the sets: the rest is not
	// kept for the worker's life.
	h.Snapshot = nil
	byGVR := map[string]*templates.Set{}
	for _, s := range sets {
		byGVR[s.Resource().GVR().String()] = s
	}
	// The bounds are set before the first request is read: nothing a
	// tenant sends is decoded without them.
	l, err := startLimits()
	if err != nil {
		_ = writeJSON(out, kindReady, ready{Error: fmt.Sprintf("setting the kernel's bounds: %v", err)})
		return 1
	}
	xcpu := make(chan os.Signal, 1)
	signal.Notify(xcpu, syscall.SIGXCPU)
	go func() {
		<-xcpu
		// Go ignores SIGXCPU unless asked: exit at once, with the status
		// that names the bound.
		os.Exit(exitCPU)
	}()
	if err := writeJSON(out, kindReady, ready{}); err != nil {
		return exitProtocol
	}
	for {
		kind, body, err := readFrame(in, small)
		if errors.Is(err, io.EOF) {
			return 0
		}
		if err != nil || kind != kindRequest {
			fmt.Fprintf(os.Stderr, "render worker: reading a request: kind %q, %v\n", kind, err)
			return exitProtocol
		}
		req, err := parseRequest(body)
		if err != nil {
			fmt.Fprintf(os.Stderr, "render worker: request: %v\n", err)
			return exitProtocol
		}
		if req.Snapshot != digest {
			// A worker serves one snapshot; the controller never sends
			// another's request, so this is a bug, not a render.
			fmt.Fprintf(os.Stderr, "render worker: a request for config snapshot %s; this worker serves %s\n", req.Snapshot, digest)
			return exitProtocol
		}
		if err := l.forRender(req.CPUSeconds, req.MemoryMiB); err != nil {
			fmt.Fprintf(os.Stderr, "render worker: bounds: %v\n", err)
			return exitProtocol
		}
		res := renderOne(in, out, byGVR, req)
		res.Retire = l.grown(retireGrowthMiB)
		b, err := encodeResult(res)
		if err != nil {
			b, _ = json.Marshal(result{Errors: []wireError{{Message: fmt.Sprintf("encoding the result: %v", err)}}})
		}
		if err := writeFrame(out, kindResult, b); err != nil {
			return exitProtocol
		}
		if res.Retire {
			return 0
		}
	}
}

// renderOne renders req, asking the controller about live children
// through in and out.
func renderOne(in io.Reader, out io.Writer, byGVR map[string]*templates.Set, req request) result {
	s := byGVR[req.GVR]
	if s == nil {
		return result{Errors: []wireError{{Message: fmt.Sprintf("the worker has no entry for %s", req.GVR)}}}
	}
	parent, err := fromWire(req.Parent)
	if err != nil {
		return result{Errors: []wireError{{Message: fmt.Sprintf("reading the resource: %v", err)}}}
	}
	var live templates.Live
	if req.Live {
		live = &askingLive{in: in, out: out, ready: map[*unstructured.Unstructured]bool{}}
	}
	// Each template is reported as it starts, so that a worker that dies
	// at once (a stack overflow takes milliseconds) still names it.
	trace := func(name string) { _ = writeFrame(out, kindTemplate, []byte(name)) }
	r, err := s.RenderHere(parent, live, trace)
	if err != nil {
		return result{Errors: toWireErrors(err)}
	}
	res := result{StatusWaits: r.StatusWaits, Waits: r.Waits, Release: r.Release, Hooks: r.Hooks, Notes: r.Notes, Dropped: r.Dropped}
	// Counted as encoded: a result past the bound is refused here, and
	// never reaches the controller's heap.
	nodes, bound := int64(0), s.Budget().ResultNodes
	for _, c := range r.Children {
		b, err := encodeValue(c.Object)
		if err != nil {
			return result{Errors: []wireError{{Message: fmt.Sprintf("encoding %s %s: %v", c.GetKind(), c.GetName(), err)}}}
		}
		if nodes += jsonNodes(b); nodes > bound {
			return result{Errors: []wireError{overNodes(bound, fmt.Sprintf("%s %s", c.GetKind(), c.GetName()))}}
		}
		res.Children = append(res.Children, b)
	}
	if r.Status != nil {
		if res.Status, err = encodeValue(r.Status); err != nil {
			return result{Errors: []wireError{{Message: fmt.Sprintf("encoding the status: %v", err)}}}
		}
		if nodes += jsonNodes(res.Status); nodes > bound {
			return result{Errors: []wireError{overNodes(bound, "the status")}}
		}
	}
	return res
}

// overNodes is the error of a result whose values passed bound at what.
func overNodes(bound int64, what string) wireError {
	return wireError{Budget: true, Message: fmt.Sprintf("the render's result holds more than %d values (renderBudget.resultNodes), counted up to %s", bound, what)}
}

// toWireErrors flattens a render's joined errors.
func toWireErrors(err error) []wireError {
	var errs []error
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	} else {
		errs = []error{err}
	}
	out := make([]wireError, 0, len(errs))
	for _, e := range errs {
		w := wireError{Message: e.Error(), Budget: errors.Is(e, budget.ErrExceeded)}
		var re *engine.RenderError
		if errors.As(e, &re) && re.Template != "" && re.Err != nil && re.Error() == e.Error() {
			w.Template, w.Line, w.Message = re.Template, re.Line, re.Err.Error()
		}
		out = append(out, w)
	}
	return out
}

// askingLive is templates.Live in a worker: it asks the controller, which
// holds the live children.
type askingLive struct {
	in  io.Reader
	out io.Writer
	// ready holds the readiness the controller sent with each child.
	ready map[*unstructured.Unstructured]bool
}

func (l *askingLive) ask(q question) (answer, error) {
	if err := writeJSON(l.out, kindQuestion, q); err != nil {
		return answer{}, err
	}
	kind, body, err := readFrame(l.in, func(byte) int64 { return 1 << 30 })
	if err != nil {
		return answer{}, err
	}
	if kind != kindAnswer {
		return answer{}, fmt.Errorf("want an answer, got frame %q", kind)
	}
	var a answer
	err = json.Unmarshal(body, &a)
	return a, err
}

// Child asks for the live child of kind and name.
func (l *askingLive) Child(kind, name string) (*unstructured.Unstructured, bool) {
	a, err := l.ask(question{Op: "child", Kind: kind, Name: name})
	if err != nil {
		panic(fmt.Sprintf("asking the controller for %s/%s: %v", kind, name, err))
	}
	if !a.Found {
		return nil, false
	}
	m, err := decodeMap(a.Object)
	if err != nil {
		panic(fmt.Sprintf("reading %s/%s from the controller: %v", kind, name, err))
	}
	u := &unstructured.Unstructured{Object: m}
	l.ready[u] = a.Ready
	return u, true
}

// Ready is what the controller said of u with it.
func (l *askingLive) Ready(u *unstructured.Unstructured) bool { return l.ready[u] }

// Current asks whether live already is what want renders.
func (l *askingLive) Current(want, live *unstructured.Unstructured) bool {
	b, err := encodeValue(want.Object)
	if err != nil {
		return false
	}
	a, err := l.ask(question{Op: "current", Kind: live.GetKind(), Name: live.GetName(), Want: b})
	if err != nil {
		panic(fmt.Sprintf("asking the controller about %s/%s: %v", live.GetKind(), live.GetName(), err))
	}
	return a.Yes
}

// lockedWriter serialises writes: each frame is one Write.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
