// Package expect remembers stencil's own writes until the informer caches
// show them, so that no sync decides a write from a view older than the
// last one it made.
//
// The choice a newcomer may question: the view is corrected, not waited
// for. A child whose cached version is older than stencil's write is read
// as what the write returned, so a sync woken by another event goes on at
// once, rather than sleeping or polling until the watch catches up; only a
// parent older than stencil's own status patch is skipped, and its patch's
// watch event queues it again.
//
// The event of a write queues nothing when it shows nothing new (a quiet
// write, WroteQuiet, that no sync read an older view of meanwhile): the
// sync that wrote it decided from what the write returned. So one edit
// of an object N resources read costs N renders, not 2N.
package expect

import (
	"strconv"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// expectationTTL bounds how long a write is expected: past it, the cache is
// trusted again, as Kubernetes' ControllerExpectations do after 5 minutes.
// An informer normally shows a write within milliseconds; only a broken
// watch takes longer, and the periodic resync covers that.
const expectationTTL = 5 * time.Minute

// Writes remembers stencil's own last write of each object (a child's
// create or apply, a prune, a status patch) until the informer cache has
// shown it: the role of Kubernetes' ControllerExpectations and of client-go's
// MutationCache. A sync woken by another event (a sibling's status, the
// parent's own status patch) can run before the watch event of stencil's
// write arrives; deciding drift from that older view would send the same
// correction again and count stencil's own repeats as a field fight. So a
// child's cached view older than the write is replaced by what the write
// returned, a pruned child the cache still shows is not deleted again, and a
// parent whose cache is older than stencil's status patch is not synced at
// all: the watch event that brings the cache up to date queues it again, so
// nothing polls.
//
// Older is told the way the MutationCache of the API server's own
// controllers tells it: resourceVersions compared as integers, which etcd
// makes them. A version that is not an integer is never held to be older.
type Writes struct {
	ttl time.Duration
	now func() time.Time

	mu  sync.Mutex
	obj map[Key]expected
	// writing holds the writes sent and not yet returned (Writing), with
	// the events of their objects that arrived meanwhile.
	writing map[Key]*inflight
}

// inflight is the writes of one object on their way, and the versions
// its informer showed meanwhile.
type inflight struct {
	n    int
	held []version
}

// version is one object version an informer showed.
type version struct {
	uid types.UID
	rv  string
}

// Key names an object stencil wrote.
type Key struct {
	gk              schema.GroupKind
	namespace, name string
}

// expected is one write the cache has not shown yet.
type expected struct {
	// obj is what the write returned; nil for a delete.
	obj *unstructured.Unstructured
	// rv is obj's resourceVersion as an integer; ok false when it is not one.
	rv uint64
	ok bool
	// deleted is the UID of the object a delete removed.
	deleted types.UID
	at      time.Time
	// quiet says the write's own watch event need not sync its resource
	// again (WroteQuiet).
	quiet bool
	// looked says a sync read the object's cache while the write was
	// expected (Looking): it may have read a view older than the write,
	// so the write's event must sync the resource again, quiet or not.
	looked bool
}

// New returns an empty Writes.
func New() *Writes {
	return &Writes{ttl: expectationTTL, now: time.Now, obj: map[Key]expected{}, writing: map[Key]*inflight{}}
}

// KeyOf returns the key of u.
func KeyOf(u *unstructured.Unstructured) Key {
	return NewKey(u.GroupVersionKind().GroupKind(), u.GetNamespace(), u.GetName())
}

// NewKey returns the key of the object of kind gk, namespace and name:
// for a sync that has not read the object yet (Looking).
func NewKey(gk schema.GroupKind, namespace, name string) Key {
	return Key{gk: gk, namespace: namespace, name: name}
}

func parseRV(rv string) (uint64, bool) {
	n, err := strconv.ParseUint(rv, 10, 64)
	return n, err == nil
}

// Wrote records what a create, apply or status patch returned (stored as
// given: callers pass a copy the cache transform has stripped).
func (e *Writes) Wrote(written *unstructured.Unstructured) { e.wrote(written, false) }

// WroteQuiet is Wrote for a write whose own watch event need not sync
// its resource again: the sync that made it decided from what the write
// returned, and the write changes nothing the resource's render reads (a
// status patch of status.reads alone; a child of an entry whose
// templates read no live children). Without it, one edit of an object N
// resources read cost 2N renders: each reader rendered again for its own
// status.reads patch, and again for the child it had just written.
// Observe tells that event apart.
func (e *Writes) WroteQuiet(written *unstructured.Unstructured) { e.wrote(written, true) }

func (e *Writes) wrote(written *unstructured.Unstructured, quiet bool) {
	if written == nil || written.GetName() == "" || written.GetKind() == "" {
		return
	}
	rv, ok := parseRV(written.GetResourceVersion())
	e.mu.Lock()
	defer e.mu.Unlock()
	e.obj[KeyOf(written)] = expected{obj: written, rv: rv, ok: ok, at: e.now(), quiet: quiet}
}

// Writing announces a write of key about to be sent, and returns what to
// call once it has returned: done records what the write returned, as
// Wrote (quiet false) or WroteQuiet do (written nil: the write failed or
// wrote nothing), and reports whether an event of the object held
// meanwhile (Observe) was not the quiet event of this write: the caller
// then queues the resource again, as that event would have.
func (e *Writes) Writing(key Key) (done func(written *unstructured.Unstructured, quiet bool) (requeue bool)) {
	e.mu.Lock()
	w := e.writing[key]
	if w == nil {
		w = &inflight{}
		e.writing[key] = w
	}
	w.n++
	e.mu.Unlock()
	return func(written *unstructured.Unstructured, quiet bool) bool {
		e.mu.Lock()
		held := w.held
		w.held = nil
		if w.n--; w.n == 0 {
			delete(e.writing, key)
		}
		e.mu.Unlock()
		seen, requeue := false, false
		for _, v := range held {
			if written != nil && v.uid == written.GetUID() && v.rv == written.GetResourceVersion() {
				seen = true
				requeue = requeue || !quiet
				continue
			}
			requeue = true
		}
		if written != nil && !seen {
			// The event is still to come: expected as before.
			e.wrote(written, quiet)
		}
		return requeue
	}
}

// Looking is called by a sync before it reads key's object from the
// cache. A view older than stencil's write read there (the write's event
// not handled yet) must be corrected by that event: so the event of a
// write a sync looked at while it was expected syncs the resource again,
// quiet or not. Called before the read, not after, so that an event
// handled between the two is counted too.
func (e *Writes) Looking(key Key) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if x, ok := e.get(key); ok && x.obj != nil {
		x.looked = true
		e.obj[key] = x
	}
}

// Deleted records a prune of the object with that UID.
func (e *Writes) Deleted(key Key, uid types.UID) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.obj[key] = expected{deleted: uid, at: e.now()}
}

// get returns the live expectation of key, dropping an expired one.
// Called with mu held.
func (e *Writes) get(key Key) (expected, bool) {
	x, ok := e.obj[key]
	if ok && e.now().Sub(x.at) > e.ttl {
		delete(e.obj, key)
		return expected{}, false
	}
	return x, ok
}

// Newer returns what stencil last wrote to the object the cache holds as
// cached (nil: the cache holds none of key's name), when the cache has not
// shown that write yet; nil when the cache is up to date.
func (e *Writes) Newer(key Key, cached *unstructured.Unstructured) *unstructured.Unstructured {
	e.mu.Lock()
	defer e.mu.Unlock()
	x, ok := e.get(key)
	if !ok || x.obj == nil {
		return nil
	}
	if cached == nil {
		// Created, and the cache has no object of that name yet.
		return x.obj
	}
	if behind(cached, x) {
		return x.obj
	}
	// Caught up, but kept until the write's event ends it (Observe): an
	// informer updates its cache before it hands the event over, and the
	// event, found unexpected, would sync the resource again.
	return nil
}

// Pruned reports whether stencil deleted this very object (by UID) and the
// cache has not shown the deletion yet.
func (e *Writes) Pruned(key Key, uid types.UID) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	x, ok := e.get(key)
	return ok && x.obj == nil && x.deleted == uid
}

// behind reports whether cached is older than the write x expects.
func behind(cached *unstructured.Unstructured, x expected) bool {
	if cached.GetUID() != x.obj.GetUID() {
		// Another object of that name: what stencil wrote is gone.
		return false
	}
	rv, ok := parseRV(cached.GetResourceVersion())
	return ok && x.ok && rv < x.rv
}

// Observe is called with each object an informer adds or updates: once the
// cache holds stencil's write, or a newer version, or another object of the
// name, the expectation is met. It reports whether obj is the very version
// a quiet write of stencil's returned (WroteQuiet), that no sync looked at
// the cache for meanwhile (Looking): its event shows nothing that the sync
// which wrote it did not decide from, so it need queue nothing.
//
// While a write of the object is on its way (Writing), every event that
// is not quiet by an earlier write is held, not reported: the watch
// event of a write can arrive before the write's response does, and only
// then is it known whether the event was the write's own. The write's
// done decides and queues what must be.
func (e *Writes) Observe(obj any) (quiet bool) {
	defer func() {
		u, ok := obj.(*unstructured.Unstructured)
		if quiet || !ok {
			return
		}
		e.mu.Lock()
		defer e.mu.Unlock()
		if w := e.writing[KeyOf(u)]; w != nil {
			w.held = append(w.held, version{uid: u.GetUID(), rv: u.GetResourceVersion()})
			quiet = true
		}
	}()
	e.end(obj, func(u *unstructured.Unstructured, x expected) bool {
		if x.obj == nil {
			return u.GetUID() != x.deleted
		}
		if behind(u, x) {
			return false
		}
		rv, ok := parseRV(u.GetResourceVersion())
		quiet = x.quiet && !x.looked && ok && x.ok && rv == x.rv && u.GetUID() == x.obj.GetUID()
		return true
	})
	return quiet
}

// Gone is called with each object an informer deletes: whatever stencil
// expected of that object is over.
func (e *Writes) Gone(obj any) {
	e.end(obj, func(u *unstructured.Unstructured, x expected) bool {
		return x.deleted == u.GetUID() || (x.obj != nil && x.obj.GetUID() == u.GetUID())
	})
}

// end drops the expectation of obj's name when met says the informer's
// object meets it.
func (e *Writes) end(obj any, met func(u *unstructured.Unstructured, x expected) bool) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return
	}
	key := KeyOf(u)
	e.mu.Lock()
	defer e.mu.Unlock()
	if x, ok := e.obj[key]; ok && met(u, x) {
		delete(e.obj, key)
	}
}

// Sweep drops every expired expectation (the periodic resync calls it), so
// that writes whose events never came (a kind no longer watched) do not
// stay.
func (e *Writes) Sweep() {
	e.mu.Lock()
	defer e.mu.Unlock()
	for k := range e.obj {
		e.get(k)
	}
}

// Len is the number of writes the caches have not shown yet.
func (e *Writes) Len() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.obj)
}
