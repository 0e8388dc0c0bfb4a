package registry

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/cache"

	"stencil.dev/stencil/config"
	"stencil.dev/stencil/contract"
	"stencil.dev/stencil/templates"
)

// OwnerUIDIndex indexes the child caches by their stencil.dev/owner-uid
// label: a custom resource's children without a list.
const OwnerUIDIndex = "stencil-owner-uid"

// Options configures a Registry. Zero values select the documented defaults.
type Options struct {
	// Dynamic lists and watches the custom resources and children.
	Dynamic dynamic.Interface
	// Metadata, when set, caches the names of every object of the child
	// kinds (see NameTaken); nil leaves Child.Names nil.
	Metadata metadata.Interface
	// Mapper resolves built-in resources to their Kind, and child kinds to
	// resources.
	Mapper meta.RESTMapper
	// Namespace limits every watch to one namespace; empty means the
	// namespaces each entry lists, or all.
	Namespace string
	// CacheSyncTimeout bounds a reload's wait for the informers it starts
	// (default 2m).
	CacheSyncTimeout time.Duration
	// Hooks is how the registry tells its user what happens.
	Hooks Hooks
}

// Hooks are the registry's calls out: the event handlers of the informers
// it builds, what the caches keep, and what a user records. Every field
// may be nil.
type Hooks struct {
	// ParentHandler returns the event handler of a configured resource's
	// informers.
	ParentHandler func(g schema.GroupVersionResource) cache.ResourceEventHandler
	// ChildHandler handles the events of every child informer.
	ChildHandler cache.ResourceEventHandler
	// ParentTransform and ChildTransform shape what the caches keep.
	ParentTransform, ChildTransform cache.TransformFunc
	// WatchFailed is told of a watch failure of a running config (for /readyz).
	WatchFailed func(at time.Time)
	// Served is told, on every evaluation, whether an entry is served.
	Served func(p *Parent)
	// Published is told of an entry when a config publishes it.
	Published func(p *Parent)
	// Removed is told of an entry a reload removed.
	Removed func(p *Parent)
	// ChildKindsResolved is called once child informers started for kinds
	// that were waiting have synced: resources that failed for want of
	// them render again.
	ChildKindsResolved func()
}

// Registry holds what stencil watches: the configured resources, each with
// its informers and templates, the child kinds and their informers, and
// the CRD informer that says which resources are served. Its lock is held
// only to read or swap maps, never across a request to the API server.
type Registry struct {
	opts Options
	// informers counts the informer goroutines running (run), so that
	// Wait can tell when all have returned.
	informers sync.WaitGroup

	// mu guards the maps below, which change when a CRD comes or goes and
	// when the config is reloaded.
	mu sync.RWMutex
	// resources holds the live config: one entry per configured resource.
	resources map[schema.GroupVersionResource]*Parent
	// byKind maps a served parent's group and kind to its GVR, for owner references.
	byKind   map[schema.GroupKind]schema.GroupVersionResource
	children map[schema.GroupVersionKind]*Child
	// waitingKinds are child kinds not (yet) served; they are looked up
	// again on every CRD change.
	waitingKinds map[schema.GroupVersionKind]bool
	// refusedKinds are child kinds found cluster-scoped: refused once and
	// never looked up again.
	refusedKinds map[schema.GroupVersionKind]bool
	// childGen counts the changes of children, so that a plan built from
	// an older state is not published over a newer one.
	childGen uint64
	// reconfiguring is set while Reconfigure prepares a config: the child kinds
	// are its to change; a CRD change meanwhile sets recheck, for it to
	// look at the waiting kinds again once it ends.
	reconfiguring, recheck bool
	// runCtx is the context informers run under once Start was called.
	runCtx context.Context
	// childCtx, under runCtx, is the child informers'; stopChildren ends
	// it when Reshard replaces them all.
	childCtx     context.Context
	stopChildren context.CancelFunc
	// share is the part of the namespaces informers are built for (a ring
	// member's, see shard.go); nil is all of them.
	share atomic.Pointer[Shard]
	// reconfigureMu makes reloads take turns.
	reconfigureMu sync.Mutex

	crds cache.SharedIndexInformer
}

// New builds the registry for cfg and its template sets, one per entry, and
// creates (but does not start) the informers. A configured resource whose
// CRD is not installed is not an error: it is served once its CRD is.
func New(ctx context.Context, opts Options, cfg *config.Config, sets []*templates.Set) (*Registry, error) {
	if opts.CacheSyncTimeout <= 0 {
		opts.CacheSyncTimeout = 2 * time.Minute
	}
	if cfg == nil || len(sets) != len(cfg.Resources) {
		return nil, errors.New("registry: one template set per configured resource is required")
	}
	r := &Registry{
		opts:         opts,
		resources:    map[schema.GroupVersionResource]*Parent{},
		byKind:       map[schema.GroupKind]schema.GroupVersionResource{},
		children:     map[schema.GroupVersionKind]*Child{},
		waitingKinds: map[schema.GroupVersionKind]bool{},
		refusedKinds: map[schema.GroupVersionKind]bool{},
	}
	if err := r.newCRDInformer(ctx); err != nil {
		return nil, err
	}
	for i, res := range cfg.Resources {
		entry, err := r.newParentKind(ctx, cfg.Path, res, sets[i], nil)
		if err != nil {
			return nil, err
		}
		r.resources[res.GVR()] = entry
		if entry.Served {
			r.byKind[entry.GVK.GroupKind()] = res.GVR()
		}
		r.published(entry)
		r.served(entry)
	}
	plan, err := r.planChildren(ctx, r.resources, r.children, r.refusedKinds, nil)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	r.commitChildrenLocked(ctx, plan, false)
	r.mu.Unlock()
	return r, nil
}

func (r *Registry) published(entry *Parent) {
	if r.opts.Hooks.Published != nil {
		r.opts.Hooks.Published(entry)
	}
}

func (r *Registry) served(entry *Parent) {
	if r.opts.Hooks.Served != nil {
		r.opts.Hooks.Served(entry)
	}
}

// informer is what run starts: an informer or a reflector-backed cache.
type informer interface{ RunWithContext(context.Context) }

// run runs inf under ctx in its own goroutine, counted for Wait.
func (r *Registry) run(ctx context.Context, inf informer) {
	r.informers.Go(func() { inf.RunWithContext(ctx) })
}

// Wait returns once every informer the registry started has returned:
// after their contexts end, a caller that returns does not leave them
// running (stencil diff, tests).
func (r *Registry) Wait() { r.informers.Wait() }

// Start runs the CRD informer and the child informers under ctx; the
// configured resources' informers start once Refresh finds them served.
// Informers started later (a CRD installed, a reload) run under ctx too.
func (r *Registry) Start(ctx context.Context) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.runCtx = ctx
	r.childCtx, r.stopChildren = context.WithCancel(ctx)
	r.run(ctx, r.crds)
	for _, childKind := range r.children {
		for _, inf := range childKind.Informers {
			r.run(r.childCtx, inf)
		}
		for _, inf := range childKind.Names {
			r.run(r.childCtx, inf)
		}
	}
}

// StartAndWait starts the informers under runCtx (Start), waits up to
// timeout for their caches, then starts the served resources' informers
// (Refresh) and waits for those too, so that the first syncs see complete
// caches. It returns ctx's error when ctx ends first.
func (r *Registry) StartAndWait(ctx, runCtx context.Context, timeout time.Duration) error {
	r.Start(runCtx)
	syncCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	// r.Synced asks the informers running at each poll, not those of the
	// first call: a ring member's reshard replaces (and stops) them while
	// this waits, and a stopped informer never syncs.
	if !cache.WaitForCacheSync(syncCtx.Done(), r.Synced) {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("CRD and child informer caches did not sync within %s", timeout)
	}
	// The CRDs are known: start the served resources' informers.
	r.Refresh(ctx)
	if !cache.WaitForCacheSync(syncCtx.Done(), r.Synced) {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("informer caches did not sync within %s", timeout)
	}
	return nil
}

// Refresh brings the configured resources' informers in line with what
// the API server serves (see refresh): Start, wait for HasSynced, then
// Refresh starts the served resources' informers.
func (r *Registry) Refresh(ctx context.Context) { r.refresh(ctx) }

// HasSynced lists HasSynced of every informer that runs: the CRD informer,
// the child informers and the informers of the served resources. A
// resource whose CRD is not installed has none, and so does not hold
// readiness back.
func (r *Registry) HasSynced() []cache.InformerSynced {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := []cache.InformerSynced{r.crds.HasSynced}
	for _, entry := range r.resources {
		if entry.stop == nil {
			continue
		}
		for _, inf := range entry.Informers {
			out = append(out, inf.HasSynced)
		}
	}
	for _, childKind := range r.children {
		for _, inf := range childKind.Informers {
			out = append(out, inf.HasSynced)
		}
		for _, inf := range childKind.Names {
			out = append(out, inf.HasSynced)
		}
	}
	return out
}

// Synced reports whether every running informer has synced, for /readyz.
func (r *Registry) Synced() bool {
	for _, s := range r.HasSynced() {
		if !s() {
			return false
		}
	}
	return true
}

// Parent returns the configured resource g, or nil. The entry is replaced,
// never changed, once published: a caller holds the version it got.
func (r *Registry) Parent(g schema.GroupVersionResource) *Parent {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.resources[g]
}

// Parents returns the configured resources.
func (r *Registry) Parents() []*Parent {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return slices.Collect(maps.Values(r.resources))
}

// Child returns the child kind k, or nil.
func (r *Registry) Child(k schema.GroupVersionKind) *Child {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.children[k]
}

// ChildKinds returns the child kinds.
func (r *Registry) ChildKinds() []*Child {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return slices.Collect(maps.Values(r.children))
}

// ServesKind reports whether a configured resource of kind gk is served.
func (r *Registry) ServesKind(gk schema.GroupKind) bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	_, ok := r.byKind[gk]
	return ok
}

// ResolveOwner returns the GVR of the cached custom resource that ref names
// in ns, matching group, kind and UID: a kind alone is ambiguous when
// several CRDs are served.
func (r *Registry) ResolveOwner(ns string, ref *metav1.OwnerReference) (schema.GroupVersionResource, bool) {
	if ref == nil {
		return schema.GroupVersionResource{}, false
	}
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return schema.GroupVersionResource{}, false
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	g, ok := r.byKind[schema.GroupKind{Group: gv.Group, Kind: ref.Kind}]
	if !ok {
		return schema.GroupVersionResource{}, false
	}
	entry := r.resources[g]
	if entry == nil {
		return schema.GroupVersionResource{}, false
	}
	parent, err := GetCached(entry.Informers, g.GroupResource(), ns, ref.Name)
	if err != nil || parent.GetUID() != ref.UID {
		return schema.GroupVersionResource{}, false
	}
	return g, true
}

// Keys returns the namespace and name of every cached custom resource of
// g, none while its informers do not run.
func (r *Registry) Keys(g schema.GroupVersionResource) []types.NamespacedName {
	entry := r.Parent(g)
	if entry == nil || entry.stop == nil {
		return nil
	}
	var out []types.NamespacedName
	for _, inf := range entry.Informers {
		for _, obj := range inf.GetIndexer().List() {
			if u, ok := obj.(*unstructured.Unstructured); ok {
				out = append(out, types.NamespacedName{Namespace: u.GetNamespace(), Name: u.GetName()})
			}
		}
	}
	return out
}

// GVRs returns the configured resources' GVRs.
func (r *Registry) GVRs() []schema.GroupVersionResource {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]schema.GroupVersionResource, 0, len(r.resources))
	for g := range r.resources {
		out = append(out, g)
	}
	return out
}

// ScopeNamespaces intersects the --namespace flag with an entry's
// namespaces. The result holds "" when every namespace is watched, and is
// empty when none is.
func ScopeNamespaces(flagNS string, entry []string) []string {
	switch {
	case flagNS == "" && len(entry) == 0:
		return []string{metav1.NamespaceAll}
	case flagNS == "":
		return entry
	case len(entry) == 0:
		return []string{flagNS}
	}
	for _, ns := range entry {
		if ns == flagNS {
			return []string{flagNS}
		}
	}
	return nil
}

func indexByOwnerUID(obj any) ([]string, error) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil, nil
	}
	if uid := m.GetLabels()[contract.LabelOwnerUID]; uid != "" {
		return []string{uid}, nil
	}
	return nil, nil
}

// InformerFor picks the informer that covers namespace ns.
func InformerFor(informers map[string]cache.SharedIndexInformer, ns string) cache.SharedIndexInformer {
	if inf, ok := informers[ns]; ok {
		return inf
	}
	return informers[metav1.NamespaceAll]
}

// GetCached returns the cached object, or a NotFound error.
func GetCached(informers map[string]cache.SharedIndexInformer, res schema.GroupResource, ns, name string) (*unstructured.Unstructured, error) {
	inf := InformerFor(informers, ns)
	if inf == nil {
		return nil, apierrors.NewNotFound(res, name)
	}
	obj, exists, err := inf.GetIndexer().GetByKey(ns + "/" + name)
	if err != nil {
		return nil, fmt.Errorf("reading %s %s/%s from cache: %w", res, ns, name, err)
	}
	if !exists {
		return nil, apierrors.NewNotFound(res, name)
	}
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return nil, fmt.Errorf("cache holds %T for %s %s/%s, want *unstructured.Unstructured", obj, res, ns, name)
	}
	return u, nil
}
