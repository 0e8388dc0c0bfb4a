// Package reads watches the objects custom resources read without owning
// them (an entry's reads, DESIGN.md) and knows which resource read what:
// an informer per read scope, shared by every resource, and an index from
// each read object (or each namespace and selector) to its readers, so
// that a change re-renders exactly those.
//
// The choice a newcomer may question: the informers start on first use,
// from the sync that needs them (which waits for their first list), and
// stop when no resource reads through them any more, not with the
// registry's. Reads are declared per entry and resolved per resource (a
// name computed from the spec), so only a sync knows what it reads;
// starting on first use keeps the registry's reload and sharding
// untouched, costs one wait per scope, and never watches a kind, or a
// namespace, no resource reads. Every watch is of one namespace: a read
// with a fixed name watches that one object by field selector (which the
// one-name RBAC rule "stencil rbac" prints allows), in the platform's
// namespace or each reader's; any other read watches its kind in the
// namespaces that hold a reader of it, and nothing is ever watched
// cluster-wide. Under a ring a member holds the readers of its own
// namespaces only (Hold), so its watches cover only those.
package reads

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"stencil.dev/stencil/config"
	"stencil.dev/stencil/templates"
	"stencil.dev/stencil/templates/readview"
)

// Reader is a custom resource that reads: its resource and name.
type Reader struct {
	// GVR is the resource's entry; the rest its namespace and name.
	GVR schema.GroupVersionResource
	types.NamespacedName
}

// Options configures a Watcher.
type Options struct {
	// Dynamic lists and watches the read kinds.
	Dynamic dynamic.Interface
	// Mapper resolves a read's kind to its resource.
	Mapper meta.RESTMapper
	// Served reports whether stencil serves a kind (its status is its
	// own output, not part of what a read sees); nil serves none.
	Served func(gk schema.GroupKind) bool
	// Enqueue queues a reader whose reads changed; nil queues nothing
	// ("stencil diff" reads once).
	Enqueue func(Reader)
	// SyncTimeout bounds the wait for a new scope's first list (default 30s).
	SyncTimeout time.Duration
	// Idle is how long a scope no reader is indexed under keeps watching
	// before it stops (default 15s): a reader deleted and created again,
	// or one whose render is resolving its other reads, does not restart
	// the watch. A swept scope stops within Idle plus sweepEvery.
	Idle time.Duration
	// Authorize, for a source of an identity (SourceAs), says whether it
	// may read what the tenant names (review.go); nil refuses every such
	// read: never read as stencil instead.
	Authorize Authorize
}

// Watcher holds the read informers and the index of readers.
type Watcher struct {
	opts Options
	// ctx is what informers run under.
	ctx context.Context

	mu     sync.Mutex
	scopes map[scope]*scoped
	// byObject indexes the readers of one object (kind, namespace,
	// name), whether it exists or not: its creation wakes them too.
	byObject map[objectKey]map[Reader]bool
	// bySelector indexes the selector readers of a kind in a namespace.
	bySelector map[spaceKey]map[Reader][]labels.Selector
	// tracked is what each reader was last indexed by, to drop it.
	tracked map[Reader]tracked
	// inUse counts, per scope, the targets of tracked readers it serves:
	// a scope at zero for Idle is stopped (sweep).
	inUse map[scope]int
	// resources remembers each read kind's resource, for Track.
	resources map[schema.GroupVersionKind]schema.GroupVersionResource
	// holds, when set, says which namespaces' readers this process keeps
	// (a ring member's share); sweep drops the others.
	holds func(ns string) bool
	// lastReset is when restMapping last reset the mapper.
	lastReset time.Time
}

// tracked is what one reader's last render looked for, and the scopes
// that serve it.
type tracked struct {
	targets []templates.ReadTarget
	scopes  []scope
}

// scope is what one informer watches.
type scope struct {
	gvr schema.GroupVersionResource
	// namespace is never empty: no read watches cluster-wide.
	namespace string
	// name, when set, is the one object a fixed read watches.
	name string
	// full keeps a Secret's data in the cache: the scope's reads say
	// secretData (or are not of Secrets). It is part of the key, so a
	// Secret read with and without secretData are two informers, and the
	// latter's cache holds only what readview.Readable lets it.
	full bool
}

// scoped is one scope's informer.
type scoped struct {
	inf  cache.SharedIndexInformer
	gvk  schema.GroupVersionKind
	gvr  schema.GroupVersionResource
	done chan struct{}
	// stop ends the informer; lastUsed (under Watcher.mu) is when a sync
	// last read through it.
	stop     context.CancelFunc
	lastUsed time.Time
	// err is the last list or watch error, for the message of a sync
	// that times out waiting; timedOut says a sync waited SyncTimeout in
	// vain: later ones fail at once until the first list succeeds, so
	// that a kind stencil may not list does not hold every worker.
	mu       sync.Mutex
	err      error
	timedOut bool
}

type objectKey struct {
	gk        schema.GroupKind
	namespace string
	name      string
}

type spaceKey struct {
	gk        schema.GroupKind
	namespace string
}

// New returns a Watcher whose informers run under ctx.
func New(ctx context.Context, opts Options) *Watcher {
	if opts.SyncTimeout <= 0 {
		opts.SyncTimeout = 30 * time.Second
	}
	if opts.Served == nil {
		opts.Served = func(schema.GroupKind) bool { return false }
	}
	if opts.Idle <= 0 {
		opts.Idle = 15 * time.Second
	}
	w := &Watcher{opts: opts, ctx: ctx, scopes: map[scope]*scoped{},
		byObject: map[objectKey]map[Reader]bool{}, bySelector: map[spaceKey]map[Reader][]labels.Selector{},
		tracked: map[Reader]tracked{}, inUse: map[scope]int{}, resources: map[schema.GroupVersionKind]schema.GroupVersionResource{}}
	go func() {
		t := time.NewTicker(sweepEvery)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				w.sweep(time.Now())
			}
		}
	}()
	return w
}

// Hold makes this process keep the readers of the namespaces holds
// accepts, and drop the others at the next sweep (their scopes then
// stop): a ring member's share.
func (w *Watcher) Hold(holds func(ns string) bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.holds = holds
}

// sweep drops the readers of namespaces this process no longer holds,
// and stops every scope no reader has been indexed under for Idle.
func (w *Watcher) sweep(now time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.holds != nil {
		for r := range w.tracked {
			if !w.holds(r.Namespace) {
				w.untrackLocked(r)
			}
		}
	}
	for sc, s := range w.scopes {
		idle := w.opts.Idle
		select {
		case <-s.done:
		default:
			// Not listed yet (a kind stencil may not list): kept longer,
			// so that its readers' retries fail at once (timedOut) rather
			// than each waiting SyncTimeout for a new scope's first list.
			idle *= 20
		}
		if w.inUse[sc] == 0 && now.Sub(s.lastUsed) >= idle {
			klog.FromContext(w.ctx).V(2).Info("No longer watching reads: no reader left", "scope", describe(sc))
			s.stop()
			delete(w.scopes, sc)
		}
	}
}

// Cached calls fn with each object the read caches hold, and whether its
// scope keeps a Secret's data (secretData): what stencil's memory holds
// of what it reads, for tests that look for what must not be there.
func (w *Watcher) Cached(fn func(u *unstructured.Unstructured, secretData bool)) {
	w.mu.Lock()
	scopes := maps.Clone(w.scopes)
	w.mu.Unlock()
	for sc, s := range scopes {
		for _, o := range s.inf.GetStore().List() {
			if u, ok := o.(*unstructured.Unstructured); ok {
				fn(u, sc.full)
			}
		}
	}
}

// Scopes describes the scopes watched, sorted, for tests and logs.
func (w *Watcher) Scopes() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]string, 0, len(w.scopes))
	for sc := range w.scopes {
		out = append(out, describe(sc))
	}
	slices.Sort(out)
	return out
}

// Source returns the ReadSource of one sync: the watcher's caches,
// started and synced on first use.
func (w *Watcher) Source(ctx context.Context) templates.ReadSource {
	return source{w: w, ctx: ctx}
}

// SourceAs is Source for a resource whose entry writes as user (an
// identity; "" is Source): a read whose object the tenant names is made
// only when user may get it (by name) or list it (by selector), as
// Options.Authorize says. Fixed reads stay stencil's.
func (w *Watcher) SourceAs(ctx context.Context, user string) templates.ReadSource {
	return source{w: w, ctx: ctx, as: user}
}

type source struct {
	w   *Watcher
	ctx context.Context
	// as is the identity a tenant-named read must be allowed to; "" none.
	as string
}

// authorize returns a *ForbiddenReadError unless the source's identity
// may verb what rd names (name "": what a selector matches) in ns, read
// with sc. Fixed reads, and a source without identity, are stencil's.
func (s source) authorize(rd config.Read, sc *scoped, verb, ns, name string) error {
	if s.as == "" || rd.Fixed() {
		return nil
	}
	gvr := sc.gvr
	refused := &ForbiddenReadError{User: s.as, Verb: verb, Resource: gvr.GroupResource(), Namespace: ns, Name: name}
	if s.w.opts.Authorize == nil {
		return refused
	}
	ok, err := s.w.opts.Authorize(s.ctx, s.as, verb, gvr, ns, name)
	switch {
	case err != nil:
		return err
	case !ok:
		return refused
	}
	return nil
}

// Get implements templates.ReadSource.
func (s source) Get(rd config.Read, ns, name string) (*unstructured.Unstructured, error) {
	sc, err := s.w.scopeOf(s.ctx, rd, ns)
	if err != nil {
		return nil, err
	}
	if err := s.authorize(rd, sc, "get", ns, name); err != nil {
		return nil, err
	}
	key := name
	if ns != "" {
		key = ns + "/" + name
	}
	obj, ok, err := sc.inf.GetIndexer().GetByKey(key)
	if err != nil || !ok {
		return nil, err
	}
	u, _ := obj.(*unstructured.Unstructured)
	return u, nil
}

// List implements templates.ReadSource.
func (s source) List(rd config.Read, ns string, sel labels.Selector) ([]*unstructured.Unstructured, error) {
	sc, err := s.w.scopeOf(s.ctx, rd, ns)
	if err != nil {
		return nil, err
	}
	if err := s.authorize(rd, sc, "list", ns, ""); err != nil {
		return nil, err
	}
	objs, err := sc.inf.GetIndexer().ByIndex(cache.NamespaceIndex, ns)
	if err != nil {
		return nil, err
	}
	var out []*unstructured.Unstructured
	for _, o := range objs {
		if u, ok := o.(*unstructured.Unstructured); ok && sel.Matches(labels.Set(u.GetLabels())) {
			out = append(out, u)
		}
	}
	return out, nil
}

// Served implements templates.ReadSource.
func (s source) Served(gk schema.GroupKind) bool { return s.w.opts.Served(gk) }

// sweepEvery is how often scopes are checked for readers.
const sweepEvery = 5 * time.Second

// scopeOf returns the synced informer that serves rd in ns, starting it
// on first use.
func (w *Watcher) scopeOf(ctx context.Context, rd config.Read, ns string) (*scoped, error) {
	gvk := rd.GVK()
	mapping, err := w.restMapping(gvk)
	if err != nil {
		return nil, fmt.Errorf("%s is not served: %w", gvk, err)
	}
	if mapping.Scope.Name() == meta.RESTScopeNameRoot {
		return nil, fmt.Errorf("%s is cluster-scoped: a read is of namespaced objects", gvk)
	}
	if ns == "" {
		// Only a cluster-scoped reader has none; nothing watches
		// cluster-wide.
		return nil, fmt.Errorf("a read of %s looks in a namespace, and this one has none", gvk)
	}
	w.mu.Lock()
	w.resources[gvk] = mapping.Resource
	sc := scopeFor(rd, mapping.Resource, ns)
	s, ok := w.scopes[sc]
	if !ok {
		s = w.start(sc, gvk, false)
		w.scopes[sc] = s
	}
	s.lastUsed = time.Now()
	w.mu.Unlock()
	defer func() {
		w.mu.Lock()
		s.lastUsed = time.Now()
		w.mu.Unlock()
	}()
	wait := w.opts.SyncTimeout
	s.mu.Lock()
	if s.timedOut {
		wait = 0
	}
	s.mu.Unlock()
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case <-s.done:
		return s, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-timer.C:
		select {
		case <-s.done:
			return s, nil
		default:
		}
		s.mu.Lock()
		s.timedOut = true
		last := s.err
		s.mu.Unlock()
		if last == nil {
			last = errors.New("no list yet")
		}
		return nil, fmt.Errorf("the watch of %s has not listed within %s: %w", describe(sc), w.opts.SyncTimeout, last)
	}
}

// scopeFor is the scope that serves rd, of resource gvr, in namespace ns
// (where the read looks: the platform's fixed namespace or the reader's).
func scopeFor(rd config.Read, gvr schema.GroupVersionResource, ns string) scope {
	sc := scope{gvr: gvr, namespace: ns, full: !rd.IsSecret() || rd.SecretData}
	if rd.Fixed() {
		// One object by name, in the one namespace it is looked for in.
		sc.name = rd.ObjectName
	}
	return sc
}

// restMapping looks gvk up. A kind the mapper does not know may be one
// whose CRD was installed since discovery was cached: the mapper is reset
// and asked again, at most once per resetEvery, so that a read of a kind
// that is not served does not hammer discovery.
func (w *Watcher) restMapping(gvk schema.GroupVersionKind) (*meta.RESTMapping, error) {
	mapping, err := w.opts.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	rm, ok := w.opts.Mapper.(meta.ResettableRESTMapper)
	if err == nil || !ok {
		return mapping, err
	}
	w.mu.Lock()
	reset := time.Since(w.lastReset) >= resetEvery
	if reset {
		w.lastReset = time.Now()
	}
	w.mu.Unlock()
	if !reset {
		return mapping, err
	}
	rm.Reset()
	return w.opts.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
}

// resetEvery bounds how often a read of a kind the mapper does not know
// resets it.
const resetEvery = 5 * time.Second

// describe names a scope in messages.
func describe(sc scope) string {
	if sc.name != "" {
		return fmt.Sprintf("%s %s/%s", sc.gvr.GroupResource(), sc.namespace, sc.name)
	}
	return fmt.Sprintf("%s in namespace %s", sc.gvr.GroupResource(), sc.namespace)
}

// start builds and runs the informer of sc; w.mu is held. Unless
// announce, the objects of its first list queue nobody: a scope started by
// a sync is read, once listed, by that sync, and no reader was indexed
// under it before. Track restarting a swept scope for a reader announces
// them, for what changed while nothing watched.
func (w *Watcher) start(sc scope, gvk schema.GroupVersionKind, announce bool) *scoped {
	ctx, stop := context.WithCancel(w.ctx)
	s := &scoped{gvk: gvk, gvr: sc.gvr, done: make(chan struct{}), stop: stop, lastUsed: time.Now()}
	tweak := func(lo *metav1.ListOptions) {
		if sc.name != "" {
			lo.FieldSelector = fields.OneTermEqualSelector("metadata.name", sc.name).String()
		}
	}
	s.inf = dynamicinformer.NewFilteredDynamicInformer(w.opts.Dynamic, sc.gvr, sc.namespace, 0,
		cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}, tweak).Informer()
	_ = s.inf.SetTransform(func(obj any) (any, error) {
		// The view's allowlist, before the object enters the cache: the
		// cache never holds what no read of the scope may see (a Secret's
		// data and annotations when sc.full is false, last-applied and
		// managedFields always). The object is fresh from the decoder,
		// so it is reduced in place.
		if u, ok := obj.(*unstructured.Unstructured); ok {
			readview.Readable(u.Object, sc.full)
		}
		return obj, nil
	})
	_ = s.inf.SetWatchErrorHandlerWithContext(func(ctx context.Context, r *cache.Reflector, err error) {
		s.mu.Lock()
		s.err = err
		s.mu.Unlock()
		cache.DefaultWatchErrorHandler(ctx, r, err)
	})
	_, _ = s.inf.AddEventHandler(cache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj any, initial bool) {
			if announce || !initial {
				w.changed(nil, obj)
			}
		},
		UpdateFunc: w.changed,
		DeleteFunc: func(obj any) { w.changed(obj, nil) },
	})
	klog.FromContext(w.ctx).V(2).Info("Watching reads", "scope", describe(sc))
	go s.inf.RunWithContext(ctx)
	go func() {
		if cache.WaitForCacheSync(ctx.Done(), s.inf.HasSynced) {
			close(s.done)
		}
	}()
	return s
}

// changed queues the readers of an object that was added, changed or
// deleted. An update that leaves what a read sees as it was (a status
// patch of a kind stencil serves, a new resourceVersion alone) queues
// nobody: that is what keeps resources that read each other from
// re-rendering each other forever.
func (w *Watcher) changed(oldObj, newObj any) {
	old, cur := asObject(oldObj), asObject(newObj)
	if old != nil && cur != nil {
		served := w.opts.Served(cur.GroupVersionKind().GroupKind())
		full := config.Read{SecretData: true}
		if reflect.DeepEqual(readview.View(old, full, served), readview.View(cur, full, served)) {
			return
		}
	}
	if w.opts.Enqueue == nil {
		return
	}
	readers := map[Reader]bool{}
	for _, u := range []*unstructured.Unstructured{old, cur} {
		if u == nil {
			continue
		}
		gk := u.GroupVersionKind().GroupKind()
		w.mu.Lock()
		for r := range w.byObject[objectKey{gk, u.GetNamespace(), u.GetName()}] {
			readers[r] = true
		}
		for r, sels := range w.bySelector[spaceKey{gk, u.GetNamespace()}] {
			for _, sel := range sels {
				if sel.Matches(labels.Set(u.GetLabels())) {
					readers[r] = true
				}
			}
		}
		w.mu.Unlock()
	}
	for r := range readers {
		w.opts.Enqueue(r)
	}
}

// asObject is obj as an object, a tombstone's included.
func asObject(obj any) *unstructured.Unstructured {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	u, _ := obj.(*unstructured.Unstructured)
	return u
}

// Track records what reader's last render looked for, replacing what it
// looked for before, and keeps the scopes that serve it watching (one
// swept while the render resolved its other reads starts again).
func (w *Watcher) Track(reader Reader, targets []templates.ReadTarget) {
	w.mu.Lock()
	defer w.mu.Unlock()
	// The new scopes are counted before the old are released, so that a
	// scope both use never reaches zero.
	tr := tracked{targets: targets}
	for _, t := range targets {
		if t.Selector == nil && t.Name == "" {
			continue // looked for nothing
		}
		gvk := t.Read.GVK()
		gvr, ok := w.resources[gvk]
		if !ok {
			continue // never resolved: no scope serves it
		}
		sc := scopeFor(t.Read, gvr, t.Namespace)
		tr.scopes = append(tr.scopes, sc)
		w.inUse[sc]++
		if _, ok := w.scopes[sc]; !ok {
			w.scopes[sc] = w.start(sc, gvk, true)
		}
	}
	w.untrackLocked(reader)
	for _, t := range targets {
		gk := t.Read.GVK().GroupKind()
		switch {
		case t.Selector != nil:
			k := spaceKey{gk, t.Namespace}
			if w.bySelector[k] == nil {
				w.bySelector[k] = map[Reader][]labels.Selector{}
			}
			w.bySelector[k][reader] = append(w.bySelector[k][reader], t.Selector)
		case t.Name != "":
			k := objectKey{gk, t.Namespace, t.Name}
			if w.byObject[k] == nil {
				w.byObject[k] = map[Reader]bool{}
			}
			w.byObject[k][reader] = true
		}
	}
	w.tracked[reader] = tr
}

// Forget drops reader from the index: it was deleted.
func (w *Watcher) Forget(reader Reader) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.untrackLocked(reader)
}

func (w *Watcher) untrackLocked(reader Reader) {
	tr := w.tracked[reader]
	for _, sc := range tr.scopes {
		if w.inUse[sc]--; w.inUse[sc] <= 0 {
			delete(w.inUse, sc)
		}
	}
	for _, t := range tr.targets {
		gk := t.Read.GVK().GroupKind()
		if t.Selector != nil {
			k := spaceKey{gk, t.Namespace}
			delete(w.bySelector[k], reader)
			if len(w.bySelector[k]) == 0 {
				delete(w.bySelector, k)
			}
			continue
		}
		k := objectKey{gk, t.Namespace, t.Name}
		delete(w.byObject[k], reader)
		if len(w.byObject[k]) == 0 {
			delete(w.byObject, k)
		}
	}
	delete(w.tracked, reader)
}

// Retain drops from the index every reader keep refuses: its entry left
// the config.
func (w *Watcher) Retain(keep func(Reader) bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for r := range w.tracked {
		if !keep(r) {
			w.untrackLocked(r)
		}
	}
}

// Readers counts the resources indexed, for tests and metrics.
func (w *Watcher) Readers() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.tracked)
}
