package ha

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// errNotHolder stands for a ring member's refusal (package ring, which
// imports this one).
var errNotHolder = errors.New("not writing: namespace not held by this ring member")

// TestWriteGateAsksTheFenceJustBeforeSending: a write refused by the fence
// never reaches the server; reads, Leases, access reviews and dry runs are
// not the fence's to decide.
func TestWriteGateAsksTheFenceJustBeforeSending(t *testing.T) {
	var reached []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached = append(reached, r.Method+" "+r.URL.Path)
	}))
	defer srv.Close()
	gate := NewWriteGate()
	var asked []string
	gate.Set(func(ns string) error {
		asked = append(asked, ns)
		if ns == "theirs" {
			return errNotHolder
		}
		return nil
	})
	client := &http.Client{Transport: gate.Wrap(http.DefaultTransport)}
	do := func(method, path string) error {
		req, err := http.NewRequest(method, srv.URL+path, strings.NewReader("{}"))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := client.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	for _, c := range []struct {
		method, path string
		refused      bool
	}{
		{http.MethodPatch, "/apis/apps/v1/namespaces/mine/deployments/web", false},
		{http.MethodPatch, "/apis/apps/v1/namespaces/theirs/deployments/web", true},
		{http.MethodPatch, "/apis/example.com/v1/namespaces/theirs/webapps/w/status", true},
		{http.MethodDelete, "/api/v1/namespaces/theirs/services/web", true},
		{http.MethodPost, "/api/v1/namespaces/theirs/events", true},
		{http.MethodGet, "/apis/apps/v1/namespaces/theirs/deployments/web", false},
		{http.MethodPut, "/apis/coordination.k8s.io/v1/namespaces/theirs/leases/stencil", false},
		{http.MethodPost, "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", false},
		{http.MethodPatch, "/apis/apps/v1/namespaces/theirs/deployments/web?dryRun=All", false},
	} {
		err := do(c.method, c.path)
		if c.refused != (err != nil) {
			t.Errorf("%s %s: refused %v, want %v (err %v)", c.method, c.path, err != nil, c.refused, err)
		}
		if c.refused && !errors.Is(err, errNotHolder) {
			t.Errorf("%s %s: %v does not wrap the fence's error", c.method, c.path, err)
		}
	}
	if len(reached) != 5 {
		t.Errorf("server reached by %d requests, want 5: %v", len(reached), reached)
	}
	if strings.Join(asked, ",") != "mine,theirs,theirs,theirs,theirs" {
		t.Errorf("fence asked for %v", asked)
	}
}
