package reconcile

import (
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/record"

	"stencil.dev/stencil/controller/reads"
	"stencil.dev/stencil/controller/reconcile/expect"
	"stencil.dev/stencil/controller/reconcile/memory"
	"stencil.dev/stencil/controller/registry"
)

// Key identifies one custom resource in the work queue: its GVR, since
// two CRDs may hold objects of the same namespace and name, and its
// namespace and name. Package memory, below this one, keys what is
// remembered by it.
type Key = memory.Key

// Options configures a Reconciler. The controller fills it from its own
// Options, with its defaults applied.
type Options struct {
	// Registry holds the configured resources, their caches and the child kinds.
	Registry *registry.Registry
	// Dynamic reads what the caches cannot tell (a foreign object's name,
	// a child read whole) and, unless Writer is set, writes children and
	// status.
	Dynamic dynamic.Interface
	// Recorder records the events of every sync, unless Writer is set.
	Recorder record.EventRecorder
	// PlanHeld renders and converges a resource a rollout holds too, after
	// telling the writer it is held: a plan ("stencil diff") shows what
	// each resource gets when it moves, not only the first wave. The
	// controller leaves it false: a held resource is left as it is.
	PlanHeld bool
	// Writer, when set, is how syncs act on the cluster ("stencil diff"
	// records dry runs); nil writes to the API server through Dynamic.
	Writer Writer
	// Impersonate returns the client that writes children as a user (an
	// entry's identity), built once per user and shared; nil: an entry
	// with an identity writes nothing (never as stencil instead). Used
	// only when Writer is nil.
	Impersonate func(user string) (dynamic.Interface, error)
	// Authorize says whether an identity may read what a tenant names
	// (reads.Reviews.Allowed); nil refuses every such read of an entry
	// with an identity (Wire gives it to the read watcher).
	Authorize reads.Authorize
	// IdentityRecheck is how long a write an identity was refused
	// (Forbidden) is not sent again, the same write of other resources
	// failing from memory meanwhile, and when the resource is looked at
	// again; and how often one whose account does not exist
	// (IdentityNotFound) is (default 20s): RBAC changes send no event
	// stencil watches.
	IdentityRecheck time.Duration
	// Metrics receives the reconciler's metrics.
	Metrics *Metrics
	// Reads resolves what entries read and tracks who read it: the read
	// watcher Wire builds, or fixtures ("stencil test", package offline);
	// nil: an entry with reads fails to sync.
	Reads ReadWatcher
	// Enqueue queues a resource again (a rollout admitting the next ones).
	Enqueue func(Key)
	// MayWrite returns nil when this replica may write for a namespace
	// (ha.FencedLock, ring.State); nil always allows.
	MayWrite func(ns string) error
	// FightBurst and FightInterval size each resource's correction budget
	// (memory.Guard): FightBurst corrections at once, then one per
	// FightInterval (defaults 5 and 10s).
	FightBurst    int
	FightInterval time.Duration
	// ConflictRecheck is how often a resource in OwnershipConflict is looked
	// at again (default 30s).
	ConflictRecheck time.Duration
	// FirstStatusDelay is how long new children get before the first
	// status says Progressing (default 15s); negative writes it at once.
	FirstStatusDelay time.Duration
}

// defaults fills in the tuning Options leaves zero. They live here, not in
// the controller, so that every Reconciler (the controller's and stencil
// diff's) decides with the same values.
func (o *Options) defaults() {
	if o.FightBurst <= 0 {
		o.FightBurst = 5
	}
	if o.FightInterval <= 0 {
		o.FightInterval = 10 * time.Second
	}
	if o.ConflictRecheck <= 0 {
		o.ConflictRecheck = 30 * time.Second
	}
	if o.FirstStatusDelay == 0 {
		o.FirstStatusDelay = 15 * time.Second
	}
	if o.IdentityRecheck <= 0 {
		o.IdentityRecheck = 20 * time.Second
	}
}

// Reconciler syncs one custom resource at a time, from any number of
// workers. What it remembers between syncs is a memo or a rate limit:
// losing it (a restart) costs at most a request, never a wrong write.
type Reconciler struct {
	opts   Options
	reg    *registry.Registry
	writer Writer
	// memory holds the memos and rate limits kept between syncs.
	memory *memory.Memory
	// expect holds stencil's own writes that the caches have not shown
	// yet: a sync never decides a write from a view older than them.
	expect   *expect.Writes
	rollouts rollouts
	// observingKinds are the owner kinds whose children the caches keep
	// whole, for templates that read them (livechildren.go).
	observingKinds *observingKinds
}

// New builds a Reconciler, with Options' defaults applied.
func New(opts Options) *Reconciler {
	opts.defaults()
	r := &Reconciler{opts: opts, reg: opts.Registry, writer: opts.Writer, expect: expect.New(), memory: memory.New(opts.FightBurst, opts.FightInterval), observingKinds: &observingKinds{}}
	if r.writer == nil {
		r.writer = apiWriter{client: opts.Dynamic, recorder: opts.Recorder, impersonate: opts.Impersonate}
	}
	return r
}

// mayWrite returns nil when this replica may write for namespace ns.
func (r *Reconciler) mayWrite(ns string) error {
	if r.opts.MayWrite == nil {
		return nil
	}
	return r.opts.MayWrite(ns)
}

// Observe tells the reconciler that a cache now shows obj (an informer's
// add or update): a write of stencil's that it shows is no longer expected.
// It reports whether the event is quiet: it shows only a write of
// stencil's that the sync which made it decided from and that no render
// reads (expect.Writes.WroteQuiet), so it need queue nothing.
func (r *Reconciler) Observe(obj any) (quiet bool) { return r.expect.Observe(obj) }

// Gone tells the reconciler that obj was deleted (its last known state):
// a prune of it is no longer expected, and its dry run is never asked again,
// so the memo stays bounded by the children that exist.
func (r *Reconciler) Gone(obj any) {
	r.expect.Gone(obj)
	if u, ok := obj.(interface{ GetUID() types.UID }); ok {
		r.memory.DryRuns.Forget(u.GetUID())
	}
}

// SweepExpectations drops the expectations that outlived their deadline,
// before a resync.
func (r *Reconciler) SweepExpectations() { r.expect.Sweep() }

// RetryRefused lets the next sync of every resource send its refused
// children and run its failed render again: a refusal can hinge on other
// objects (memory.Refusals). The periodic resync calls it.
func (r *Reconciler) RetryRefused() {
	r.memory.Refusals.Reset()
	r.memory.RenderFailures.Reset()
}
