package controller

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes/scheme"
	authenticationv1 "k8s.io/client-go/kubernetes/typed/authentication/v1"
	authorizationv1 "k8s.io/client-go/kubernetes/typed/authorization/v1"
	coordinationv1 "k8s.io/client-go/kubernetes/typed/coordination/v1"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	corev1 "k8s.io/api/core/v1"

	"stencil.dev/stencil/config"
	"stencil.dev/stencil/contract"
	"stencil.dev/stencil/controller/ha"
	"stencil.dev/stencil/controller/reads"
	"stencil.dev/stencil/controller/reconcile"
	"stencil.dev/stencil/controller/reconcile/transform"
	"stencil.dev/stencil/controller/registry"
	"stencil.dev/stencil/controller/requeue"
	"stencil.dev/stencil/controller/ring"
	"stencil.dev/stencil/entry"
	"stencil.dev/stencil/renderworker"
	"stencil.dev/stencil/templates"
)

// Kube is the typed part of client-go stencil uses: the core group for
// events, the coordination group for the leader-election Lease, and the
// authorization group for the access reviews of a reload (access.go). A
// kubernetes.Interface satisfies it, but run builds only these group
// clients: the whole clientset brings every group's typed client and apply
// configurations into the binary (12 of its 68 MB), and with them 6.6 MiB
// of resident pages the process never uses.
type Kube interface {
	CoreV1() typedcorev1.CoreV1Interface
	CoordinationV1() coordinationv1.CoordinationV1Interface
	AuthorizationV1() authorizationv1.AuthorizationV1Interface
	AuthenticationV1() authenticationv1.AuthenticationV1Interface
}

// Options configures a Controller. Zero values select the documented
// defaults. The Controller keeps its own copy, never changed after New: a
// reloaded config lives in the registry (Reconfigure), under its lock.
type Options struct {
	// Config is the loaded stencil.yaml, as at start-up.
	Config *config.Config
	// Sets holds the parsed templates, one per Config.Resources entry, in order.
	Sets []*templates.Set
	// Dynamic reads and writes custom resources and children (the
	// children of an entry without identity).
	Dynamic dynamic.Interface
	// Impersonate returns the client that writes children as a user, an
	// entry's identity (Impersonators.Client); nil: an entry with an
	// identity writes nothing.
	Impersonate func(user string) (dynamic.Interface, error)
	// Metadata, when set, caches the names of every object of the child
	// kinds, so that creating a child needs no read (see liveChild); nil
	// reads the object on a cache miss instead.
	Metadata metadata.Interface
	// Kube records events, holds the leader-election Lease and reviews a
	// reload's access. It may be nil when Recorder is set and leader
	// election is off (unit tests); a reload's access is then not reviewed.
	Kube Kube
	// Mapper resolves each configured GVR to its Kind, and child kinds to resources.
	Mapper meta.RESTMapper
	// Metrics receives stencil's metrics; nil creates a private registry.
	Metrics *Metrics
	// Recorder overrides the event recorder built from Kube (tests).
	Recorder record.EventRecorder

	// Namespace limits every watch to one namespace; empty means the
	// namespaces each entry lists, or all.
	Namespace string
	// Workers is the number of parallel reconciles (default DefaultWorkers).
	Workers int
	// Wall, when set, is the pool of render workers the sets render in:
	// a reconcile whose render goes slow lends its slot (lendSlot).
	Wall *renderworker.Pool
	// ResyncPeriod re-enqueues every custom resource this often, to repair
	// what no watch event reported (default 10m; a converged resync writes nothing).
	ResyncPeriod time.Duration
	// CacheSyncTimeout bounds the wait for the informers' first list (default 2m).
	CacheSyncTimeout time.Duration
	// MaxRetries caps the retries of a transient failure before the key is
	// dropped until its next event or resync (default 15).
	MaxRetries int
	// DrainTimeout bounds how long shutdown waits for queued work (default 20s).
	DrainTimeout time.Duration
	// FightBurst and FightInterval size the per-resource token bucket that
	// limits drift corrections: FightBurst corrections at once, then one per
	// FightInterval (defaults 5 and 10s, as reconcile.New applies them).
	FightBurst    int
	FightInterval time.Duration
	// ConflictRecheck is how often a resource in OwnershipConflict is looked
	// at again (default 30s). The foreign object carries no stencil label, so
	// no watch reports its deletion; the recheck costs one GET, no write.
	ConflictRecheck time.Duration
	// FirstStatusDelay is how long a resource whose children were just
	// created waits for them before its first status says Progressing
	// (default 15s; negative writes it at once). Usually the children are
	// ready first, and the resource gets one status patch, not two. 15s,
	// not less: on a busy cluster (10,000 WebApps created at once) a quarter
	// of the Deployments took longer than 5s, and each extra patch held a
	// worker for a round trip.
	FirstStatusDelay time.Duration
	// LeaderElection, when enabled, runs the workers only while holding the Lease.
	LeaderElection LeaderElection
	// LeaseTimings are the durations of the leader-election Lease and of a
	// ring member's Lease (zero: ha.DefaultTimings); New refuses timings
	// that fail ha.Timings.Validate.
	LeaseTimings ha.Timings
	// WriteGate, when set, is the gate in the clients' transport
	// (rest.Config.Wrap(WriteGate.Wrap)); New gives it this Controller's
	// write fence.
	WriteGate *ha.WriteGate
	// Ring, when named, runs this replica as a member of a ring that splits
	// the namespaces (exclusive with LeaderElection).
	Ring Ring
	// MetricsAddr and HealthAddr are the listen addresses of /metrics and of
	// /healthz and /readyz; empty disables each server.
	MetricsAddr, HealthAddr string
	// MetricsSecure serves /metrics over HTTPS to callers the API server
	// authenticates and authorises to get /metrics (securemetrics.go);
	// MetricsCertDir holds its tls.crt and tls.key (empty: self-signed).
	MetricsSecure  bool
	MetricsCertDir string
	// ManageCRDs applies the CRDs the config's schemas generate at start
	// and on every reload, and never deletes one (managedcrds.go).
	ManageCRDs bool
}

// DefaultWorkers is the number of parallel reconciles when Options.Workers
// is not set, and the default of stencil run's --workers.
const DefaultWorkers = 4

// defaults fills in what Options leaves zero; the reconciler's tuning
// (FightBurst, FightInterval, ConflictRecheck, FirstStatusDelay) is left
// to reconcile.New, which applies the same defaults to stencil diff.
func (o *Options) defaults() {
	if o.Workers <= 0 {
		o.Workers = DefaultWorkers
	}
	if o.ResyncPeriod == 0 {
		o.ResyncPeriod = 10 * time.Minute
	}
	if o.CacheSyncTimeout <= 0 {
		o.CacheSyncTimeout = 2 * time.Minute
	}
	if o.MaxRetries <= 0 {
		o.MaxRetries = 15
	}
	if o.DrainTimeout <= 0 {
		o.DrainTimeout = 20 * time.Second
	}
	if o.Metrics == nil {
		o.Metrics = NewMetrics()
	}
	if o.LeaseTimings == (ha.Timings{}) {
		o.LeaseTimings = ha.DefaultTimings
	}
}

// Controller reconciles every configured custom resource.
type Controller struct {
	opts Options

	// reg is the watch registry: the configured resources, the child
	// kinds and their informers, and the CRDs that say what is served.
	reg *registry.Registry
	// config is the config running now (New's, then each reload's).
	config atomic.Pointer[config.Config]
	// entries are config's entries compiled (package entry), from its sets.
	entries atomic.Pointer[[]*entry.Entry]

	queue       workqueue.TypedRateLimitingInterface[reconcile.Key]
	recorder    record.EventRecorder
	broadcaster record.EventBroadcaster
	// rec is the reconciler the workers call.
	rec    *reconcile.Reconciler
	health *health
	// fence, under leader election or in a ring, says whether this replica
	// may still write for a namespace (see ha.FencedLock, ring.State); nil
	// otherwise.
	fence func(ns string) error
	// ring is this replica's membership of a ring (run --ring); nil
	// otherwise.
	ring *ring.State
	// leaseTimings are the Leases' durations (leader election, ring).
	leaseTimings ha.Timings
	// events wraps the event sink: fenced, and flushed before shutdown.
	events *eventSink
	// lend starts a reconcile worker in place of one whose render went
	// slow (runWorkers sets it); nil before the workers run.
	lend atomic.Pointer[func() (done func())]
}

// LeaderElection configures the Lease that several replicas compete for.
type LeaderElection struct {
	// Enabled turns leader election on.
	Enabled bool
	// Namespace and Name locate the Lease.
	Namespace, Name string
	// Identity names this replica in the Lease (default: hostname).
	Identity string
}

// New builds a Controller and creates (but does not start) its informers.
// A configured resource whose CRD is not installed is not an error: it is
// served once its CRD is (see the registry package).
func New(ctx context.Context, opts Options) (*Controller, error) {
	opts.defaults()
	if opts.Config == nil || len(opts.Sets) != len(opts.Config.Resources) {
		return nil, errors.New("controller: Options.Sets must hold one template set per configured resource")
	}
	c := &Controller{
		opts: opts,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.DefaultTypedControllerRateLimiter[reconcile.Key](),
			workqueue.TypedRateLimitingQueueConfig[reconcile.Key]{Name: "stencil", MetricsProvider: opts.Metrics.queue}),
		health:       &health{},
		leaseTimings: opts.LeaseTimings,
	}
	if err := opts.LeaseTimings.Validate(); err != nil {
		return nil, fmt.Errorf("controller: lease timings: %w", err)
	}
	if opts.Ring.Name != "" && opts.LeaderElection.Enabled {
		return nil, errors.New("controller: a ring and leader election are exclusive: every ring member works, on its share")
	}
	c.recorder = opts.Recorder
	if c.recorder == nil {
		if opts.Kube == nil {
			return nil, errors.New("controller: Options.Kube or Options.Recorder is required")
		}
		// Not tied to ctx: a cancelled context shuts the broadcaster down at
		// once, and SIGTERM cancels ctx before the workers drain, so the
		// events of the drained reconciles would be dropped ("broadcaster
		// already stopped"). Run shuts it down after the drain, once flushed.
		c.broadcaster = record.NewBroadcaster(record.WithContext(context.WithoutCancel(ctx)))
		c.events = &eventSink{EventSink: &typedcorev1.EventSinkImpl{Interface: opts.Kube.CoreV1().Events("")}, fence: c.mayWrite}
		c.broadcaster.StartRecordingToSink(c.events)
		c.recorder = c.broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: contract.FieldManager})
	}

	// What a tenant names is read as the entry's identity only when an
	// access review allows it; without Kube (unit tests), never.
	var authorize reads.Authorize
	if opts.Kube != nil {
		authorize = reads.NewReviews(opts.Kube.AuthorizationV1().SubjectAccessReviews()).Allowed
	}
	reg, rec, err := reconcile.Wire(ctx, registry.Options{
		Dynamic: opts.Dynamic, Metadata: opts.Metadata, Mapper: opts.Mapper,
		Namespace: opts.Namespace, CacheSyncTimeout: opts.CacheSyncTimeout,
		Hooks: registry.Hooks{
			ParentHandler:      func(g schema.GroupVersionResource) cache.ResourceEventHandler { return c.parentHandler(ctx, g) },
			ChildHandler:       c.childHandler(ctx),
			ParentTransform:    transform.Parent,
			WatchFailed:        c.health.watchFailed,
			Served:             opts.Metrics.setServed,
			Published:          c.precreate,
			Removed:            func(entry *registry.Parent) { opts.Metrics.served.DeleteLabelValues(entry.Label) },
			ChildKindsResolved: func() { c.EnqueueAll() },
		},
	}, reconcile.Options{
		Dynamic: opts.Dynamic, Impersonate: opts.Impersonate, Authorize: authorize, Recorder: c.recorder, Metrics: opts.Metrics.reconcile,
		Enqueue: c.queue.Add, MayWrite: c.mayWrite,
		FightBurst: opts.FightBurst, FightInterval: opts.FightInterval,
		ConflictRecheck: opts.ConflictRecheck, FirstStatusDelay: opts.FirstStatusDelay,
	}, opts.Config, opts.Sets)
	if err != nil {
		return nil, err
	}
	c.reg, c.rec = reg, rec
	c.config.Store(opts.Config)
	entries := templates.Entries(opts.Sets)
	c.entries.Store(&entries)
	c.health.synced = reg.Synced
	if opts.WriteGate != nil {
		opts.WriteGate.Set(c.mayWrite)
	}
	// Registered once per Metrics: tests build several controllers on one.
	if err := opts.Metrics.Registry.Register(newCachedResources(c)); err != nil && !errors.As(err, new(prometheus.AlreadyRegisteredError)) {
		return nil, fmt.Errorf("registering stencil_cached_resources: %w", err)
	}
	if opts.Wall != nil {
		opts.Wall.SetSlow(c.lendSlot)
	}
	return c, nil
}

// parentHandler enqueues a custom resource on every change but a quiet
// status patch of stencil's own (observingHandler).
func (c *Controller) parentHandler(ctx context.Context, g schema.GroupVersionResource) cache.ResourceEventHandler {
	return c.observingHandler(func(obj any) {
		if m, ok := objectMeta(ctx, obj, "gvr", g.String()); ok {
			c.queue.Add(reconcile.Key{GVR: g, NamespacedName: types.NamespacedName{Namespace: m.GetNamespace(), Name: m.GetName()}})
		}
	}, false)
}

// childHandler maps a child to the custom resource that controls it.
func (c *Controller) childHandler(ctx context.Context) cache.ResourceEventHandler {
	return c.observingHandler(func(obj any) {
		m, ok := objectMeta(ctx, obj, "informer", "child")
		if !ok {
			return
		}
		if key, ok := c.resolveControllerRef(m.GetNamespace(), metav1.GetControllerOf(m)); ok {
			c.queue.Add(key)
		}
	}, true)
}

// observingHandler first tells the reconciler what the cache now shows (a
// write of stencil's it may have waited for), then enqueues what the event
// concerns. Resyncs with an unchanged resourceVersion are skipped: the
// periodic resync of the controller, not of the informer, re-checks
// converged objects. So is the event of a quiet write of stencil's own
// (Reconciler.Observe): the sync that made it decided from what it
// shows, and no render reads what it changed (a reader's own
// status.reads patch, the child it has just written). With ownerMoves, an
// update that changes an object's controller enqueues the old one too,
// which lost a child.
func (c *Controller) observingHandler(enqueue func(obj any), ownerMoves bool) cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if c.rec.Observe(obj) {
				return
			}
			enqueue(obj)
		},
		UpdateFunc: func(old, cur any) {
			if sameResourceVersion(old, cur) {
				return
			}
			if c.rec.Observe(cur) {
				return
			}
			if ownerMoves && controllerChanged(old, cur) {
				enqueue(old)
			}
			enqueue(cur)
		},
		DeleteFunc: func(obj any) {
			obj = unwrapTombstone(obj)
			c.rec.Gone(obj)
			enqueue(obj)
		},
	}
}

// controllerChanged reports whether cur lost old's controller reference.
func controllerChanged(old, cur any) bool {
	om, err1 := meta.Accessor(old)
	cm, err2 := meta.Accessor(cur)
	if err1 != nil || err2 != nil {
		return false
	}
	oldRef, curRef := metav1.GetControllerOf(om), metav1.GetControllerOf(cm)
	return oldRef != nil && (curRef == nil || oldRef.UID != curRef.UID)
}

// resolveControllerRef returns the key of the cached custom resource that
// ref names (registry.Registry.ResolveOwner).
func (c *Controller) resolveControllerRef(ns string, ref *metav1.OwnerReference) (reconcile.Key, bool) {
	g, ok := c.reg.ResolveOwner(ns, ref)
	if !ok {
		return reconcile.Key{}, false
	}
	return reconcile.Key{GVR: g, NamespacedName: types.NamespacedName{Namespace: ns, Name: ref.Name}}, true
}

// objectMeta returns the metadata of an informer's object, a tombstone's
// last known state included; an object without metadata is reported (with
// where, key-value pairs naming the informer) and skipped.
func objectMeta(ctx context.Context, obj any, where ...any) (metav1.Object, bool) {
	m, err := meta.Accessor(unwrapTombstone(obj))
	if err != nil {
		utilruntime.HandleErrorWithContext(ctx, err, "Unexpected object in an informer", where...)
		return nil, false
	}
	return m, true
}

// unwrapTombstone returns the last known state of an object whose deletion
// the watch missed, or obj itself.
func unwrapTombstone(obj any) any {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		return d.Obj
	}
	return obj
}

func sameResourceVersion(old, cur any) bool {
	om, err1 := meta.Accessor(old)
	cm, err2 := meta.Accessor(cur)
	return err1 == nil && err2 == nil && om.GetResourceVersion() == cm.GetResourceVersion()
}

// EnqueueAll adds every cached custom resource to the queue: the periodic
// ReadCache calls fn with each object stencil's read caches hold, and
// whether its scope keeps a Secret's data: what the process's memory
// holds of what resources read (tests look there for what must not be).
func (c *Controller) ReadCache(fn func(u *unstructured.Unstructured, secretData bool)) {
	c.rec.ReadCache(fn)
}

// resync, also used by tests to force one.
func (c *Controller) EnqueueAll() int {
	c.rec.SweepExpectations()
	n := 0
	for _, g := range c.reg.GVRs() {
		n += c.enqueueResource(g)
	}
	return n
}

// enqueueResource adds every cached custom resource of g to the queue.
func (c *Controller) enqueueResource(g schema.GroupVersionResource) int {
	keys := c.reg.Keys(g)
	for _, k := range keys {
		c.queue.Add(reconcile.Key{GVR: g, NamespacedName: k})
	}
	return len(keys)
}

// precreate makes the metric series of a published entry exist.
func (c *Controller) precreate(entry *registry.Parent) {
	var names []string
	for _, k := range entry.Set.Kinds() {
		names = append(names, k.Kind)
	}
	c.opts.Metrics.precreate(entry.Label, names, entry.Res.Rollout != nil)
}

// Run starts the health and metrics servers and, under leader election when
// enabled, the informers and workers. It returns nil after ctx is cancelled
// and in-flight work has drained.
func (c *Controller) Run(ctx context.Context) error {
	if c.broadcaster != nil {
		defer c.broadcaster.Shutdown()
		// Runs first: the events of the last reconciles are written before
		// the broadcaster stops.
		defer c.events.flush(klog.FromContext(ctx), 5*time.Second)
	}
	stopServers, err := c.serve(ctx)
	if err != nil {
		return err
	}
	defer stopServers()
	if c.opts.LeaderElection.Enabled {
		return c.runLeaderElected(ctx)
	}
	// A ring member works on its share, and a lone replica on everything:
	// each leads, as stencil_leader counts it.
	c.opts.Metrics.setLeader(true)
	if c.opts.Ring.Name != "" {
		return c.runRing(ctx)
	}
	return c.runWorkers(ctx, func() bool { return false })
}

// lendSlot is the render pool's slow hook (renderworker.Pool.SetSlow).
func (c *Controller) lendSlot() func() {
	if f := c.lend.Load(); f != nil {
		return (*f)()
	}
	return func() {}
}

// runWorkers starts the informers, waits (bounded) for their caches, runs the
// workers until ctx is cancelled, then drains, unless leaseLost says the
// leader-election Lease was lost: then another replica may already be
// writing, and in-flight work is cancelled at once.
func (c *Controller) runWorkers(ctx context.Context, leaseLost func() bool) error {
	logger := klog.FromContext(ctx)
	runCtx, stopInformers := context.WithCancel(ctx)
	defer stopInformers()
	if c.opts.ManageCRDs {
		if err := applyCRDs(ctx, c.opts.Dynamic, *c.entries.Load(), c.mayWrite("") == nil); err != nil {
			return fmt.Errorf("managing CRDs: %w", err)
		}
	}
	if err := c.reg.StartAndWait(ctx, runCtx, c.opts.CacheSyncTimeout); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	c.health.started.Store(true)
	configured := len(c.reg.GVRs())
	logger.Info("Caches synced, starting workers", "workers", c.opts.Workers, "resources", configured)

	// Workers keep a context of their own so that a SIGTERM lets in-flight
	// reconciles finish their writes instead of failing them half-way.
	workCtx, stopWork := context.WithCancel(context.WithoutCancel(ctx))
	defer stopWork()
	var wg sync.WaitGroup
	for range c.opts.Workers {
		wg.Go(func() {
			for c.processNextItem(workCtx) {
			}
		})
	}
	// A reconcile whose render went slow (a tenant's costly input, which
	// the render workers bound) lends its slot: one more worker takes
	// items until that render ends, so that a few hostile resources do
	// not hold the whole queue up for their deadlines. The pool lends at
	// most as many places as it has.
	lend := func() func() {
		var ended atomic.Bool
		wg.Go(func() {
			for !ended.Load() && c.processNextItem(workCtx) {
			}
		})
		return func() { ended.Store(true) }
	}
	c.lend.Store(&lend)
	defer c.lend.Store(nil)
	go c.resyncLoop(ctx)

	<-ctx.Done()
	if leaseLost() {
		logger.Info("Lost the Lease: stopping the workers at once, in-flight writes cancelled")
		stopWork()
		c.queue.ShutDown()
		wg.Wait()
		return nil
	}
	logger.Info("Shutting down, draining the work queue", "queued", c.queue.Len(), "timeout", c.opts.DrainTimeout)
	drained := make(chan struct{})
	go func() {
		c.queue.ShutDownWithDrain()
		close(drained)
	}()
	select {
	case <-drained:
	case <-time.After(c.opts.DrainTimeout):
		logger.Info("Drain timed out, cancelling in-flight work")
		stopWork()
		c.queue.ShutDown()
	}
	wg.Wait()
	logger.Info("Workers stopped")
	return nil
}

func (c *Controller) resyncLoop(ctx context.Context) {
	t := time.NewTicker(c.opts.ResyncPeriod)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			// Refused children are sent once more: a refusal can hinge
			// on other objects.
			c.rec.RetryRefused()
			n := c.EnqueueAll()
			klog.FromContext(ctx).V(4).Info("Periodic resync", "enqueued", n)
		}
	}
}

// processNextItem is the standard worker step: Get, defer Done, sync, then
// Forget, retry with back-off, or drop.
func (c *Controller) processNextItem(ctx context.Context) bool {
	key, shutdown := c.queue.Get()
	if shutdown {
		return false
	}
	defer c.queue.Done(key)
	if c.ring != nil {
		// A view change waits for this sync (ring.State.Adopt).
		defer c.ring.BeginSync()()
		if !c.ring.Holds(key.Namespace) {
			// Another member's now; its caches hold the resource.
			c.queue.Forget(key)
			return true
		}
	}
	logger := klog.LoggerWithValues(klog.FromContext(ctx), "gvr", key.GVR.String(), "object", klog.KRef(key.Namespace, key.Name))
	ctx = klog.NewContext(ctx, logger)

	label := key.GVR.GroupResource().String()
	start := time.Now()
	err := c.rec.Sync(ctx, key)
	c.opts.Metrics.reconcileDuration.WithLabelValues(label).Observe(time.Since(start).Seconds())
	c.handleErr(ctx, key, label, err)
	return true
}

func (c *Controller) handleErr(ctx context.Context, key reconcile.Key, label string, err error) {
	logger := klog.FromContext(ctx)
	after, err := requeue.Split(err)
	if after > 0 {
		c.queue.AddAfter(key, after)
	}
	switch {
	case err == nil:
		c.opts.Metrics.reconcileTotal.WithLabelValues(label, resultSuccess).Inc()
		c.queue.Forget(key)
	case errors.Is(err, ha.ErrNotLeader):
		// The elector is about to report the Lease lost (the workers then
		// stop at once); should the renewal still succeed, the key comes back.
		c.opts.Metrics.reconcileTotal.WithLabelValues(label, resultError).Inc()
		logger.V(2).Info("Reconcile stopped before a write", "err", err)
		c.queue.AddRateLimited(key)
	case errors.Is(err, ring.ErrNotHolder):
		// The view is changing; every resource of the share is queued
		// again once the new view is adopted (ring.Run).
		logger.V(4).Info("Reconcile stopped before a write", "err", err)
		c.queue.Forget(key)
	case errors.Is(err, ring.ErrLeaseNotRenewed):
		// The workers are stopping (ring.State.Trip).
		c.opts.Metrics.reconcileTotal.WithLabelValues(label, resultError).Inc()
		c.queue.Forget(key)
	case requeue.IsTerminal(err):
		// Already written to status; retrying cannot help until the object changes.
		c.opts.Metrics.reconcileTotal.WithLabelValues(label, resultTerminal).Inc()
		logger.V(2).Info("Reconcile failed, not retrying until the resource changes", "err", err)
		c.queue.Forget(key)
	case c.queue.NumRequeues(key) < c.opts.MaxRetries:
		c.opts.Metrics.reconcileTotal.WithLabelValues(label, resultError).Inc()
		// Every failed attempt is logged: a persistent cause (a missing RBAC
		// rule, a webhook down) must show at the default verbosity long before
		// the retries run out; the back-off bounds how often this logs.
		if apierrors.IsConflict(err) {
			// Optimistic concurrency at work: the cache was behind a write.
			logger.V(2).Info("Reconcile raced a concurrent write, retrying", "err", err)
		} else {
			logger.Error(err, "Reconcile failed, retrying", "retries", c.queue.NumRequeues(key))
		}
		c.queue.AddRateLimited(key)
	default:
		c.opts.Metrics.reconcileTotal.WithLabelValues(label, resultError).Inc()
		c.queue.Forget(key)
		utilruntime.HandleErrorWithContext(ctx, err, "Dropping resource out of the queue after retries", "retries", c.opts.MaxRetries)
	}
}
