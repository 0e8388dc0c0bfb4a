//go:build integration

package integration

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"

	"stencil.dev/stencil/controller"
)

// readRequests records the lists and watches of Secrets and ConfigMaps
// a controller makes, and which of its watches are still open.
type readRequests struct {
	mu sync.Mutex
	// seen is every list or watch, as "secrets ns?query" (ns "" is
	// cluster-wide; metadataOnly=true a request for names only).
	seen []string
	// open counts open watches by "resource ns".
	open map[string]int
}

// observe is a counter's onGet.
func (rr *readRequests) observe(r *http.Request, resp *http.Response) {
	resource, ns, ok := collectionOf(r.URL.Path)
	if !ok || (resource != "secrets" && resource != "configmaps") {
		return
	}
	q := r.URL.Query()
	rr.mu.Lock()
	defer rr.mu.Unlock()
	// A metadata-only request (the children's names informer: no
	// contents) says so in its Accept header.
	meta := strings.Contains(r.Header.Get("Accept"), "as=PartialObjectMetadata")
	rr.seen = append(rr.seen, fmt.Sprintf("%s %s?labelSelector=%s&fieldSelector=%s&watch=%s&metadataOnly=%t", resource, ns, q.Get("labelSelector"), q.Get("fieldSelector"), q.Get("watch"), meta))
	if q.Get("watch") == "true" && resp.StatusCode == http.StatusOK {
		key := resource + " " + ns
		rr.open[key]++
		resp.Body = &onClose{ReadCloser: resp.Body, closed: func() {
			rr.mu.Lock()
			rr.open[key]--
			rr.mu.Unlock()
		}}
	}
}

// openWatches returns how many watches of resource in ns are open.
func (rr *readRequests) openWatches(resource, ns string) int {
	rr.mu.Lock()
	defer rr.mu.Unlock()
	return rr.open[resource+" "+ns]
}

// requests returns what was seen so far.
func (rr *readRequests) requests() []string {
	rr.mu.Lock()
	defer rr.mu.Unlock()
	return slices.Clone(rr.seen)
}

// onClose calls closed once when the body is closed.
type onClose struct {
	io.ReadCloser
	once   sync.Once
	closed func()
}

func (c *onClose) Close() error {
	c.once.Do(c.closed)
	return c.ReadCloser.Close()
}

// collectionOf parses a list or watch path: /api/v1/secrets,
// /api/v1/namespaces/x/secrets, /apis/g/v/namespaces/x/r. An object's
// path (one more segment) is not a collection.
func collectionOf(path string) (resource, ns string, ok bool) {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		parts = parts[2:]
	case len(parts) >= 3 && parts[0] == "apis":
		parts = parts[3:]
	default:
		return "", "", false
	}
	switch len(parts) {
	case 1:
		return parts[0], "", true
	case 3:
		if parts[0] == "namespaces" {
			return parts[2], parts[1], true
		}
	}
	return "", "", false
}

// readScope makes the namespaces of a read-scope test: the platform's,
// PREFIX-platform-N, holding the ConfigMap platform-defaults, and count
// tenant namespaces PREFIX-N-II, each holding the Secret db. It returns
// the platform's namespace, the tenants' and the suffix N.
func readScope(ctx context.Context, t *testing.T, admin dynamic.Interface, prefix string, count int) (string, []string, int64) {
	t.Helper()
	suffix := time.Now().UnixNano() % 100000
	platform := fmt.Sprintf("%s-platform-%d", prefix, suffix)
	newNamespace(ctx, t, admin, platform)
	if _, err := createOnce(ctx, admin.Resource(configmaps).Namespace(platform), object(configmaps, "ConfigMap", platform, "platform-defaults",
		map[string]any{"data": map[string]any{"region": "eu-west-1"}})); err != nil {
		t.Fatal(err)
	}
	var spaces []string
	for i := range count {
		ns := fmt.Sprintf("%s-%d-%02d", prefix, suffix, i)
		spaces = append(spaces, ns)
		newNamespace(ctx, t, admin, ns)
		if _, err := createOnce(ctx, admin.Resource(secrets).Namespace(ns), object(secrets, "Secret", ns, "db",
			map[string]any{"data": map[string]any{"password": "eA=="}})); err != nil {
			t.Fatal(err)
		}
	}
	return platform, spaces, suffix
}

// TestReadWatchesFollowReaders: with Readers in 2 of 10 namespaces, each
// naming a Secret, Secrets are listed and watched in those 2 only; the
// platform's ConfigMap, a fixed read, is watched by name in its
// namespace; no list or watch of a read is cluster-wide (the children's
// informers are: by label, and of names only); and once the last
// Reader of a namespace is deleted, its watches end within 30 s.
func TestReadWatchesFollowReaders(t *testing.T) {
	ctx := context.Background()
	admin := dynamic.NewForConfigOrDie(restConfig(t))
	platform, spaces, _ := readScope(ctx, t, admin, "it-scope", 10)
	rr := &readRequests{open: map[string]int{}}
	cnt := &counter{mutating: map[string]int{}, onGet: rr.observe}
	// Every namespace (the run's --namespace unset): the readers decide.
	r, _ := startReaders(ctx, t, cnt, "", platform)
	defer r.stop(t)
	// startReaders waits for the CRD in the namespace it is given; "" lists all.
	withReaders := spaces[:2]
	for _, ns := range withReaders {
		for _, name := range []string{"a", "b"} {
			if _, err := createOnce(ctx, admin.Resource(readers).Namespace(ns), reader(ns, name, nil, map[string]any{"passwordSecret": "db", "region": true, "tier": "web"})); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, ns := range withReaders {
		for _, name := range []string{"a", "b"} {
			poll(t, time.Minute, ns+"/"+name+" Ready", func() (bool, error) {
				u, err := admin.Resource(readers).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
				return err == nil && readyTrue(u), nil
			})
		}
	}

	seen := rr.requests()
	var secretSpaces []string
	fixed := false
	for _, s := range seen {
		resource, rest, _ := strings.Cut(s, " ")
		ns, query, _ := strings.Cut(rest, "?")
		switch {
		case resource == "secrets" && ns == "":
			t.Errorf("a cluster-wide request for Secrets: %s", s)
		case resource == "secrets":
			secretSpaces = append(secretSpaces, ns)
		case resource == "configmaps" && ns == "" && strings.HasPrefix(query, "labelSelector=&") && !strings.HasSuffix(query, "metadataOnly=true"):
			t.Errorf("a cluster-wide request for ConfigMaps' contents that is not the children's informer: %s", s)
		case resource == "configmaps" && ns == platform:
			fixed = true
			if !strings.Contains(query, "fieldSelector=metadata.name=platform-defaults") {
				t.Errorf("the platform's ConfigMap, a fixed read, not watched by name: %s", s)
			}
		}
	}
	slices.Sort(secretSpaces)
	secretSpaces = slices.Compact(secretSpaces)
	t.Logf("readers in %v of 10 namespaces: Secrets listed and watched in %v; %d lists and watches of Secrets and ConfigMaps: %q", withReaders, secretSpaces, len(seen), seen)
	if !slices.Equal(secretSpaces, withReaders) {
		t.Errorf("Secrets listed or watched in %v, want exactly %v", secretSpaces, withReaders)
	}
	if !fixed {
		t.Errorf("the platform's ConfigMap was never listed in %s", platform)
	}

	// The last Readers of the second namespace go: its watches end.
	gone := withReaders[1]
	if n := rr.openWatches("secrets", gone); n == 0 {
		t.Fatalf("no open watch of Secrets in %s before its readers were deleted", gone)
	}
	deleted := time.Now()
	for _, name := range []string{"a", "b"} {
		if err := admin.Resource(readers).Namespace(gone).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	poll(t, 30*time.Second, "the watch of Secrets in "+gone+" ended", func() (bool, error) {
		return rr.openWatches("secrets", gone) == 0, nil
	})
	t.Logf("the last Reader of %s deleted: its Secrets watch ended %s later; %d still open in %s", gone, time.Since(deleted).Round(time.Millisecond), rr.openWatches("secrets", withReaders[0]), withReaders[0])
	if rr.openWatches("secrets", withReaders[0]) == 0 {
		t.Errorf("the watch of Secrets in %s, which still has readers, ended", withReaders[0])
	}
}

// secretWatchSpaces returns the namespaces rr has an open Secret watch in.
func (rr *readRequests) secretWatchSpaces() []string {
	rr.mu.Lock()
	defer rr.mu.Unlock()
	var out []string
	for key, n := range rr.open {
		if ns, ok := strings.CutPrefix(key, "secrets "); ok && n > 0 {
			out = append(out, ns)
		}
	}
	slices.Sort(out)
	return out
}

// TestRingReadWatchesSplit: a ring of 3 members serving Readers in 30
// namespaces, each naming a Secret of its namespace: once the ring has
// settled, every namespace's Secrets are watched by exactly one member
// (the one that holds it), so the members' read watches split the
// namespaces as their shares do.
func TestRingReadWatchesSplit(t *testing.T) {
	ctx := context.Background()
	admin := dynamic.NewForConfigOrDie(restConfig(t))
	platform, spaces, suffix := readScope(ctx, t, admin, "it-ringreads", 30)
	ring := fmt.Sprintf("it-ringreads-%d", suffix)
	member := func(i int) func(*controller.Options) {
		return func(o *controller.Options) {
			o.Ring = controller.Ring{Name: ring, Namespace: platform, Identity: fmt.Sprintf("member-%d", i)}
		}
	}
	var members []*running
	var seen []*readRequests
	rr := &readRequests{open: map[string]int{}}
	r, path := startReaders(ctx, t, &counter{mutating: map[string]int{}, onGet: rr.observe}, "", platform, member(0))
	members, seen = append(members, r), append(seen, rr)
	for i := 1; i < 3; i++ {
		rr := &readRequests{open: map[string]int{}}
		r := startWith(t, restConfig(t), &counter{mutating: map[string]int{}, onGet: rr.observe}, "", path, func(o *controller.Options) { member(i)(o) })
		members, seen = append(members, r), append(seen, rr)
	}
	defer func() {
		// All at once: a member stopped alone hands its share over while
		// the others run on. What this test measures is done by then; a
		// member whose Lease lapsed meanwhile (a loaded machine) says so
		// and is not a failure of it.
		for _, r := range members {
			r.stopped = true
			r.cancel()
		}
		for _, r := range members {
			select {
			case err := <-r.done:
				if err != nil {
					t.Logf("a member stopped with: %v", err)
				}
			case <-time.After(30 * time.Second):
				t.Error("a ring member did not stop within 30s of cancel")
			}
		}
	}()
	poll(t, 2*time.Minute, "3 members to settle on a view of 3", func() (bool, error) {
		for _, r := range members {
			if r.counterValue(t, "stencil_ring_members") != 3 {
				return false, nil
			}
		}
		return true, nil
	})
	for _, ns := range spaces {
		if _, err := createOnce(ctx, admin.Resource(readers).Namespace(ns), reader(ns, "a", nil, map[string]any{"passwordSecret": "db", "region": true, "tier": "web"})); err != nil {
			t.Fatal(err)
		}
	}
	for _, ns := range spaces {
		poll(t, 2*time.Minute, ns+"/a Ready", func() (bool, error) {
			u, err := admin.Resource(readers).Namespace(ns).Get(ctx, "a", metav1.GetOptions{})
			return err == nil && readyTrue(u), nil
		})
	}
	// Watches a member opened before a handover end once its readers
	// there are dropped (the next sweep) and idle: within a minute.
	var each [][]string
	poll(t, time.Minute, "every namespace's Secrets watched by exactly one member", func() (bool, error) {
		each = each[:0]
		count := map[string]int{}
		for _, rr := range seen {
			spaces := rr.secretWatchSpaces()
			each = append(each, spaces)
			for _, ns := range spaces {
				count[ns]++
			}
		}
		for _, ns := range spaces {
			if count[ns] != 1 {
				return false, nil
			}
		}
		return len(count) == len(spaces), nil
	})
	var sizes []int
	for _, s := range each {
		sizes = append(sizes, len(s))
	}
	t.Logf("30 namespaces with a Reader each, a ring of 3: the members watch Secrets in %v namespaces, disjoint, covering all 30", sizes)
}
