package registry

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/klog/v2"

	"stencil.dev/stencil/config"
	"stencil.dev/stencil/templates"
)

// A reload is all or nothing. Reconfigure builds what the new config needs
// (parent informers for new entries, child informers for new kinds and
// namespaces), runs them and waits for their caches without the lock; only
// once every one has synced does it swap the config in, under the lock, in
// one step. Refused, it stops what it built, and the running config serves
// exactly as before: the workers never saw any of the new one.

// preparedSyncPoll is how often a reload looks at the caches it waits for.
const preparedSyncPoll = 50 * time.Millisecond

// pending gates the watch errors of informers built for a config not yet
// committed: a refused reload must not mark the running replica unready,
// and its error names what failed.
type pending struct {
	committed atomic.Bool

	mu   sync.Mutex
	errs map[string]error // by resource
}

func (p *pending) record(name string, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.errs == nil {
		p.errs = map[string]error{}
	}
	p.errs[name] = err
}

// lastError returns the latest watch error recorded for name, or nil.
func (p *pending) lastError(name string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.errs[name]
}

// denied returns the first resource stencil was refused access to, by
// name: RBAC does not fix itself within a sync timeout, so the reload
// need not wait that long to say so.
func (p *pending) denied() (string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, name := range slices.Sorted(maps.Keys(p.errs)) {
		if err := p.errs[name]; apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) {
			return name, err
		}
	}
	return "", nil
}

// preparedConfig is a new config's registry entries, built and synced but
// not yet published.
type preparedConfig struct {
	cfg *config.Config
	// next holds the new config's entries; those in kept carry over the
	// running entry's informers and are re-read when committed.
	next     map[schema.GroupVersionResource]*Parent
	kept     map[schema.GroupVersionResource]bool
	children *childPlan
	gate     *pending
	// stopChildren ends the child informers built for the config; nil when
	// none were started (the workers do not run yet).
	stopChildren context.CancelFunc
}

// discard stops everything built for a refused config, and nothing of the
// running one (kept entries share its informers).
func (p *preparedConfig) discard() {
	if p.stopChildren != nil {
		p.stopChildren()
	}
	for g, entry := range p.next {
		if !p.kept[g] && entry.stop != nil {
			entry.stop()
		}
	}
}

// sameWatch reports whether two versions of an entry watch the same objects
// (so its informers can be kept across a reload).
func sameWatch(a, b config.Resource) bool {
	return a.GVR() == b.GVR() && a.Selector == b.Selector && strings.Join(a.Namespaces, ",") == strings.Join(b.Namespaces, ",")
}

// Reconfigure swaps in a new, already validated config and its templates,
// atomically: entries that are new start (once their CRD is served),
// entries that are gone stop (their children stay as they are), and every
// custom resource of the new config is re-rendered, which applies what a
// changed template now renders and costs nothing where it renders the
// same. A reload whose informers do not sync is refused with an error naming the resource (and the refused verbs), and
// changes nothing. It works before Start too (a standby replica keeps its
// config current), and is safe to call while workers read the registry.
// It returns the configured resources, each of whose custom resources the
// caller renders again. beforeCommit, when set, runs once everything is
// prepared and checked and before the swap: the reload's writes (its
// CRDs), so that a reload refused has written nothing; its error refuses
// the reload.
func (r *Registry) Reconfigure(ctx context.Context, cfg *config.Config, sets []*templates.Set, beforeCommit func(context.Context) error) ([]schema.GroupVersionResource, error) {
	if cfg == nil {
		return nil, errors.New("registry: Reconfigure needs a config")
	}
	if len(sets) != len(cfg.Resources) {
		return nil, fmt.Errorf("registry: %d template sets for %d configured resources", len(sets), len(cfg.Resources))
	}
	// One reload at a time: each prepares against the state the last one left.
	r.reconfigureMu.Lock()
	defer r.reconfigureMu.Unlock()
	r.mu.Lock()
	r.reconfiguring = true
	running, have, refused, runCtx, childCtx := maps.Clone(r.resources), maps.Clone(r.children), maps.Clone(r.refusedKinds), r.runCtx, r.childCtx
	r.mu.Unlock()
	defer r.endReconfigure(ctx)

	p, err := r.prepare(ctx, cfg, sets, running, have, refused, runCtx, childCtx)
	if err != nil {
		return nil, err
	}
	if beforeCommit != nil {
		if err := beforeCommit(ctx); err != nil {
			p.discard()
			return nil, err
		}
	}
	r.commit(ctx, p)
	return slices.Collect(maps.Keys(p.next)), nil
}

// prepare builds and, when the workers run, starts and syncs what cfg
// needs beyond the running config, without the lock.
func (r *Registry) prepare(ctx context.Context, cfg *config.Config, sets []*templates.Set,
	running map[schema.GroupVersionResource]*Parent, have map[schema.GroupVersionKind]*Child,
	refused map[schema.GroupVersionKind]bool, runCtx, childCtx context.Context) (*preparedConfig, error) {
	p := &preparedConfig{cfg: cfg, next: map[schema.GroupVersionResource]*Parent{},
		kept: map[schema.GroupVersionResource]bool{}, gate: &pending{}}
	for i, res := range cfg.Resources {
		g := res.GVR()
		if old, ok := running[g]; ok && sameWatch(old.Res, res) {
			entry := *old
			entry.Res, entry.Set = res, sets[i]
			p.next[g], p.kept[g] = &entry, true
			continue
		}
		entry, err := r.newParentKind(ctx, cfg.Path, res, sets[i], p.gate)
		if err != nil {
			return nil, err
		}
		p.next[g] = entry
	}
	plan, err := r.planChildren(ctx, p.next, have, refused, p.gate)
	if err != nil {
		return nil, err
	}
	if len(plan.refused) > 0 {
		var kinds []string
		for k := range plan.refused {
			kinds = append(kinds, k.String())
		}
		slices.Sort(kinds)
		return nil, fmt.Errorf("%s: child kind %s is cluster-scoped: children live in their custom resource's namespace", cfg.Path, strings.Join(kinds, ", "))
	}
	p.children = plan
	if runCtx == nil {
		// Before Run nothing runs yet; runWorkers starts every informer
		// and waits for all of them.
		return p, nil
	}
	var wait []namedInformer
	childCtx, stopChildren := context.WithCancel(childCtx)
	p.stopChildren = stopChildren
	for _, a := range plan.added {
		r.run(childCtx, a.inf)
		wait = append(wait, a)
	}
	for g, entry := range p.next {
		if p.kept[g] || !r.crdServes(entry) {
			continue
		}
		// Started here, so that a resource stencil may not watch refuses
		// the reload; published (served, byKind) by refreshLocked at commit.
		parentCtx, stop := context.WithCancel(runCtx)
		entry.stop = stop
		for _, inf := range entry.Informers {
			r.run(parentCtx, inf)
			wait = append(wait, namedInformer{name: g.GroupResource().String(), inf: inf})
		}
	}
	if err := r.waitPrepared(ctx, cfg.Path, wait, p.gate); err != nil {
		p.discard()
		return nil, err
	}
	return p, nil
}

// waitPrepared waits, bounded by CacheSyncTimeout, for the informers of a
// prepared config; it gives up at once when stencil is denied a resource.
func (r *Registry) waitPrepared(ctx context.Context, path string, wait []namedInformer, gate *pending) error {
	if len(wait) == 0 {
		return nil
	}
	deadline := time.NewTimer(r.opts.CacheSyncTimeout)
	defer deadline.Stop()
	tick := time.NewTicker(preparedSyncPoll)
	defer tick.Stop()
	for {
		if name, err := gate.denied(); err != nil {
			return fmt.Errorf("%s: stencil may not list and watch %s: %w", path, name, err)
		}
		var unsynced []namedInformer
		for _, w := range wait {
			if !w.inf.HasSynced() {
				unsynced = append(unsynced, w)
			}
		}
		if len(unsynced) == 0 {
			return nil
		}
		select {
		case <-tick.C:
			continue
		case <-ctx.Done():
			return fmt.Errorf("%s: reload cancelled while waiting for the informers of %s: %w", path, unsynced[0].name, ctx.Err())
		case <-deadline.C:
		}
		var names []string
		var last error
		for _, w := range unsynced {
			names = append(names, w.name)
			if err := gate.lastError(w.name); err != nil {
				last = err
			}
		}
		slices.Sort(names)
		names = slices.Compact(names)
		if last != nil {
			return fmt.Errorf("%s: informers for %s did not sync within %s: %w", path, strings.Join(names, ", "), r.opts.CacheSyncTimeout, last)
		}
		return fmt.Errorf("%s: informers for %s did not sync within %s", path, strings.Join(names, ", "), r.opts.CacheSyncTimeout)
	}
}

// commit publishes a prepared config in one step under the lock: it stops
// what the running config had and the new one does not, and starts what
// the new one has that was not started yet (its CRD came since, or the
// workers did not run when it was prepared).
func (r *Registry) commit(ctx context.Context, p *preparedConfig) {
	logger := klog.FromContext(ctx)
	r.mu.Lock()
	defer r.mu.Unlock()
	p.gate.committed.Store(true)
	for g := range p.kept {
		// Re-read: a CRD change may have started or stopped the entry's
		// informers since the reload began.
		entry := *r.resources[g]
		entry.Res, entry.Set = p.next[g].Res, p.next[g].Set
		p.next[g] = &entry
	}
	for g, old := range r.resources {
		if p.kept[g] {
			continue
		}
		if old.stop != nil {
			old.stop()
		}
		if old.Served {
			delete(r.byKind, old.GVK.GroupKind())
		}
		if _, ok := p.next[g]; !ok {
			if r.opts.Hooks.Removed != nil {
				r.opts.Hooks.Removed(old)
			}
			logger.Info("Stopped serving resource: removed from the config; its children stay as they are", "gvr", g.String())
		}
	}
	r.resources = p.next
	for g, entry := range r.resources {
		if !p.kept[g] && entry.Builtin {
			// Served from the start (newParentKind): refreshLocked sees no
			// change to publish.
			r.byKind[entry.GVK.GroupKind()] = g
		}
		r.published(entry)
		r.refreshLocked(ctx, g, entry)
	}
	r.commitChildrenLocked(ctx, p.children, p.stopChildren == nil)
}

// endReconfigure ends a reload, committed or refused, and looks again at the
// waiting child kinds if a CRD changed while it ran.
func (r *Registry) endReconfigure(ctx context.Context) {
	r.mu.Lock()
	r.reconfiguring = false
	recheck := r.recheck
	r.recheck = false
	r.mu.Unlock()
	if recheck {
		r.resolveWaiting(ctx)
	}
}
