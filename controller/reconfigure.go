package controller

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

	"stencil.dev/stencil/gvr"
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
	cfg *gvr.Config
	// next holds the new config's entries; those in kept carry over the
	// running entry's informers and are re-read when committed.
	next     map[schema.GroupVersionResource]*parentKind
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
	for g, pk := range p.next {
		if !p.kept[g] && pk.stop != nil {
			pk.stop()
		}
	}
}

// sameWatch reports whether two versions of an entry watch the same objects
// (so its informers can be kept across a reload).
func sameWatch(a, b gvr.Resource) bool {
	return a.GVR() == b.GVR() && a.Selector == b.Selector && strings.Join(a.Namespaces, ",") == strings.Join(b.Namespaces, ",")
}

// Reconfigure swaps in a new, already validated config and its templates,
// atomically: entries that are new start (once their CRD is served),
// entries that are gone stop (their children stay as they are), and every
// custom resource of the new config is re-rendered, which applies what a
// changed template now renders and costs nothing where it renders the
// same. A reload that stencil lacks the RBAC for (checkAccess, before
// anything of it starts), or whose informers do not sync, is refused with
// an error naming the resource (and the refused verbs), and changes
// nothing. It works before Run too (a standby replica keeps its
// config current), and is safe to call while workers run.
func (c *Controller) Reconfigure(ctx context.Context, cfg *gvr.Config, sets []*templates.Set) error {
	if cfg == nil {
		return errors.New("controller: Reconfigure needs a config")
	}
	if len(sets) != len(cfg.Resources) {
		return fmt.Errorf("controller: %d template sets for %d configured resources", len(sets), len(cfg.Resources))
	}
	logger := klog.FromContext(ctx)
	// One reload at a time: each prepares against the state the last one left.
	c.reloadMu.Lock()
	defer c.reloadMu.Unlock()
	c.mu.Lock()
	c.reloading = true
	running, have, refused, runCtx := maps.Clone(c.resources), maps.Clone(c.children), maps.Clone(c.refusedKinds), c.runCtx
	c.mu.Unlock()
	defer c.endReload(ctx)

	p, err := c.prepare(ctx, cfg, sets, running, have, refused, runCtx)
	if err != nil {
		return err
	}
	c.commit(ctx, p)
	// Every resource renders again with the new templates; those of new
	// entries too, whose informers' first events reached the workers
	// before the entry was published.
	n := 0
	for g := range p.next {
		n += c.enqueueResource(g)
	}
	logger.Info("Config reloaded", "resources", len(cfg.Resources), "requeued", n)
	return nil
}

// prepare builds and, when the workers run, starts and syncs what cfg
// needs beyond the running config, without the lock.
func (c *Controller) prepare(ctx context.Context, cfg *gvr.Config, sets []*templates.Set,
	running map[schema.GroupVersionResource]*parentKind, have map[schema.GroupVersionKind]*childKind,
	refused map[schema.GroupVersionKind]bool, runCtx context.Context) (*preparedConfig, error) {
	p := &preparedConfig{cfg: cfg, next: map[schema.GroupVersionResource]*parentKind{},
		kept: map[schema.GroupVersionResource]bool{}, gate: &pending{}}
	for i, res := range cfg.Resources {
		g := res.GVR()
		if old, ok := running[g]; ok && sameWatch(old.res, res) {
			pk := *old
			pk.res, pk.set = res, sets[i]
			p.next[g], p.kept[g] = &pk, true
			continue
		}
		pk, err := c.newParentKind(ctx, cfg.Path, res, sets[i], p.gate)
		if err != nil {
			return nil, err
		}
		p.next[g] = pk
	}
	plan, err := c.planChildren(ctx, p.next, have, refused, p.gate)
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
	// Before anything of the new config runs: refused, nothing was started,
	// and the informers built above are garbage.
	if err := c.checkAccess(ctx, c.reloadNeeds(p, have)); err != nil {
		return nil, fmt.Errorf("%s: %w", cfg.Path, err)
	}
	if runCtx == nil {
		// Before Run nothing runs yet; runWorkers starts every informer
		// and waits for all of them.
		return p, nil
	}
	var wait []namedInformer
	childCtx, stopChildren := context.WithCancel(runCtx)
	p.stopChildren = stopChildren
	for _, a := range plan.added {
		go a.inf.RunWithContext(childCtx)
		wait = append(wait, a)
	}
	for g, pk := range p.next {
		if p.kept[g] || !c.crdServes(pk) {
			continue
		}
		// Started here, so that a resource stencil may not watch refuses
		// the reload; published (served, byKind) by refreshLocked at commit.
		parentCtx, stop := context.WithCancel(runCtx)
		pk.stop = stop
		for _, inf := range pk.informers {
			go inf.RunWithContext(parentCtx)
			wait = append(wait, namedInformer{name: g.GroupResource().String(), inf: inf})
		}
	}
	if err := c.waitPrepared(ctx, cfg.Path, wait, p.gate); err != nil {
		p.discard()
		return nil, err
	}
	return p, nil
}

// waitPrepared waits, bounded by CacheSyncTimeout, for the informers of a
// prepared config; it gives up at once when stencil is denied a resource.
func (c *Controller) waitPrepared(ctx context.Context, path string, wait []namedInformer, gate *pending) error {
	if len(wait) == 0 {
		return nil
	}
	deadline := time.NewTimer(c.opts.CacheSyncTimeout)
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
			return fmt.Errorf("%s: informers for %s did not sync within %s: %w", path, strings.Join(names, ", "), c.opts.CacheSyncTimeout, last)
		}
		return fmt.Errorf("%s: informers for %s did not sync within %s", path, strings.Join(names, ", "), c.opts.CacheSyncTimeout)
	}
}

// commit publishes a prepared config in one step under the lock: it stops
// what the running config had and the new one does not, and starts what
// the new one has that was not started yet (its CRD came since, or the
// workers did not run when it was prepared).
func (c *Controller) commit(ctx context.Context, p *preparedConfig) {
	logger := klog.FromContext(ctx)
	c.mu.Lock()
	defer c.mu.Unlock()
	p.gate.committed.Store(true)
	for g := range p.kept {
		// Re-read: a CRD change may have started or stopped the entry's
		// informers since the reload began.
		pk := *c.resources[g]
		pk.res, pk.set = p.next[g].res, p.next[g].set
		p.next[g] = &pk
	}
	for g, old := range c.resources {
		if p.kept[g] {
			continue
		}
		if old.stop != nil {
			old.stop()
		}
		if old.served {
			delete(c.byKind, old.gvk.GroupKind())
		}
		if _, ok := p.next[g]; !ok {
			c.opts.Metrics.served.DeleteLabelValues(old.label)
			logger.Info("Stopped serving resource: removed from the config; its children stay as they are", "gvr", g.String())
		}
	}
	c.resources = p.next
	for g, pk := range c.resources {
		if !p.kept[g] && pk.builtin {
			// Served from the start (newParentKind): refreshLocked sees no
			// change to publish.
			c.byKind[pk.gvk.GroupKind()] = g
		}
		c.precreateLocked(pk)
		c.refreshLocked(ctx, g, pk)
	}
	c.commitChildrenLocked(ctx, p.children, p.stopChildren == nil)
}

// endReload ends a reload, committed or refused, and looks again at the
// waiting child kinds if a CRD changed while it ran.
func (c *Controller) endReload(ctx context.Context) {
	c.mu.Lock()
	c.reloading = false
	recheck := c.recheck
	c.recheck = false
	c.mu.Unlock()
	if recheck {
		c.resolveWaiting(ctx)
	}
}
