package ha

import (
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
)

// WriteGate asks the write fence once more for every write, in the HTTP
// transport, after client-go's rate limiter has let it go and just before
// it is sent. The fence is also asked before each write is built (reconcile/sync.go),
// but a write can then wait in the client-side rate limiter; a process
// paused (SIGSTOP, a frozen VM) during that wait sent it on resume, 17 s
// after the check, while another replica already held the Lease: the fault
// suite's leader-pause caught one such status patch. Asked here, the check
// and the send are microseconds apart, well inside the margin the fence
// keeps (LeaseDuration - RenewDeadline).
type WriteGate struct {
	fence atomic.Pointer[func(ns string) error]
}

// NewWriteGate returns a gate that lets everything through until a
// Controller built with it (Options.WriteGate) sets its fence.
func NewWriteGate() *WriteGate { return &WriteGate{} }

// Wrap is a rest.Config WrapTransport: writes go through rt only while the
// fence allows them.
func (g *WriteGate) Wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		if f := g.fence.Load(); f != nil && fenced(req) {
			if err := (*f)(requestNamespace(req.URL.Path)); err != nil {
				return nil, fmt.Errorf("%s %s: %w", req.Method, req.URL.Path, err)
			}
		}
		return rt.RoundTrip(req)
	})
}

// Set makes fence the gate's fence (Controller.New does, with its own).
func (g *WriteGate) Set(fence func(ns string) error) { g.fence.Store(&fence) }

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// fenced reports whether req is a write the fence decides: a persisted
// change of an object. Not the Leases (the fence is made of them), not the
// access reviews of a reload, not dry runs.
func fenced(req *http.Request) bool {
	switch req.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return false
	}
	p := req.URL.Path
	if strings.HasPrefix(p, "/apis/coordination.k8s.io/") || strings.HasPrefix(p, "/apis/authorization.k8s.io/") {
		return false
	}
	return !strings.Contains(req.URL.RawQuery, "dryRun=")
}

// requestNamespace returns the namespace in an API path
// (/api/v1/namespaces/NS/... or /apis/G/V/namespaces/NS/...), or "".
func requestNamespace(path string) string {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	for i := 0; i+1 < len(parts); i++ {
		if parts[i] == "namespaces" && i >= 2 {
			// A namespace object itself (/api/v1/namespaces/NS) is not in one.
			if i+2 < len(parts) {
				return parts[i+1]
			}
			return ""
		}
	}
	return ""
}
