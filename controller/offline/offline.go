// Package offline runs the controller's own sync of one custom resource
// over fixtures instead of a cluster: "stencil test" (package configtest)
// records what the controller would write for a test case's resource,
// given the children and objects the case says the cluster holds.
//
// The choice a newcomer may question: a case is not rendered and its
// status assembled here. The package builds the registry the controller
// reads (every entry's CRD installed and Established, over a fake API
// that holds nothing), fills its caches by hand with the case's resource
// and observed children, runs reconcile.Reconciler.Sync once, and records
// each write through a reconcile.Writer, as "stencil diff" does against a
// live cluster. One code path decides the children, the status, the
// events and what is pruned, so a golden file cannot hold what the
// controller would not write.
package offline

import (
	"cmp"
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/klog/v2"

	"stencil.dev/stencil/config"
	"stencil.dev/stencil/config/kinds"
	"stencil.dev/stencil/contract"
	"stencil.dev/stencil/controller/reads"
	"stencil.dev/stencil/controller/reconcile"
	"stencil.dev/stencil/controller/registry"
	"stencil.dev/stencil/controller/requeue"
	"stencil.dev/stencil/templates"
)

// UID is the UID a case's resource gets when it names none: its children's
// owner references and owner-uid label carry it, as on a cluster.
const UID = "uid-of-the-test-resource"

// Cluster is the registry the controller reads, built once for a config
// with no API server behind it; each Sync fills its caches anew.
type Cluster struct {
	cfg     *config.Config
	sets    []*templates.Set
	reg     *registry.Registry
	mapper  *mapper
	metrics *reconcile.Metrics
	// api answers what a sync asks beyond the caches (a GET where no
	// cached object holds a name): nothing exists.
	api  dynamic.Interface
	stop context.CancelFunc
}

// New builds the cluster of cfg's entries (sets, one per entry). kinds
// gives the kind of an entry that generates no CRD, by resource (the kind
// its test cases' resources name): the CRD stencil would find installed.
func New(ctx context.Context, cfg *config.Config, sets []*templates.Set, kinds map[schema.GroupVersionResource]string) (*Cluster, error) {
	mapper := newMapper(cfg)
	listKinds := map[schema.GroupVersionResource]string{registry.CRDResource: "CustomResourceDefinitionList"}
	var crds []runtime.Object
	for i, res := range cfg.Resources {
		kind := cmp.Or(sets[i].Entry().Kind, kinds[res.GVR()])
		if kind == "" {
			// No case serves it: it is not served here, as on a cluster
			// without its CRD.
			continue
		}
		mapper.add(schema.GroupVersionKind{Group: res.Group, Version: res.Version, Kind: kind}, res.GVR())
		listKinds[res.GVR()] = kind + "List"
		crd, err := installed(sets[i], kind)
		if err != nil {
			return nil, err
		}
		crds = append(crds, crd)
		for _, k := range sets[i].Kinds() {
			if m, err := mapper.RESTMapping(k.GroupKind(), k.Version); err == nil {
				listKinds[m.Resource] = k.Kind + "List"
			}
		}
	}
	// The registry logs what it serves at the default verbosity, for an
	// operator; here it would only bury the cases' results.
	ctx = klog.NewContext(ctx, logr.Discard())
	watched := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), listKinds, crds...)
	reg, err := registry.New(ctx, registry.Options{Dynamic: watched, Mapper: mapper}, cfg, sets)
	if err != nil {
		return nil, err
	}
	runCtx, stop := context.WithCancel(ctx)
	if err := reg.StartAndWait(ctx, runCtx, 30*time.Second); err != nil {
		stop()
		return nil, err
	}
	return &Cluster{cfg: cfg, sets: sets, reg: reg, stop: stop, mapper: mapper,
		metrics: reconcile.NewMetrics(prometheus.NewRegistry()),
		api:     dynamicfake.NewSimpleDynamicClient(runtime.NewScheme())}, nil
}

// Close stops the registry's informers.
func (c *Cluster) Close() {
	c.stop()
	c.reg.Wait()
}

// installed is the CRD of set's entry as the API server shows it once
// Established: the generated one, or one of kind that serves the
// entry's version and keeps any status.
func installed(set *templates.Set, kind string) (*unstructured.Unstructured, error) {
	res := set.Resource()
	if crd := set.Entry().CRD; crd != nil {
		obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(crd)
		if err != nil {
			return nil, fmt.Errorf("%s: its CRD: %w", set.Entry().Label, err)
		}
		u := &unstructured.Unstructured{Object: obj}
		u.SetAPIVersion("apiextensions.k8s.io/v1")
		u.SetKind("CustomResourceDefinition")
		u.Object["status"] = map[string]any{"conditions": []any{map[string]any{"type": "Established", "status": "True"}}}
		return u, nil
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": res.Resource + "." + res.Group},
		"spec": map[string]any{"group": res.Group, "scope": "Namespaced",
			"names": map[string]any{"kind": kind, "plural": res.Resource},
			"versions": []any{map[string]any{"name": res.Version, "served": true, "storage": true,
				"schema": map[string]any{"openAPIV3Schema": map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}}},
		"status": map[string]any{"conditions": []any{map[string]any{"type": "Established", "status": "True"}}},
	}}, nil
}

// Case is what one sync starts from: the cluster as a test case gives it.
type Case struct {
	// Resource is the custom resource as the API server stores it.
	Resource *unstructured.Unstructured
	// Observed are the objects that hold its children's names. One with no
	// controller reference is taken as the resource's own child, as
	// stencil would have written it; one controlled by another object is
	// a foreign object holding the name.
	Observed []*unstructured.Unstructured
	// Reads are the objects the entry's reads find.
	Reads []*unstructured.Unstructured
	// RBAC, for an entry with an identity, are the ServiceAccounts, Roles,
	// ClusterRoles and bindings the cluster holds: each child write is
	// checked against them as the API server checks an impersonated
	// write, and a write they do not allow is Forbidden. Nil: the
	// identity's account exists and may make every write.
	RBAC []*unstructured.Unstructured
}

// Sync runs the controller's sync of in's resource once, through the
// entry of set, and returns what it did. An error is one the case cannot
// run for (a *CaseError: its resource is not served by set's entry, an
// observed object is of a kind no entry renders); what the sync itself
// returns is in Recording.Err.
func (c *Cluster) Sync(ctx context.Context, set *templates.Set, in Case) (*Recording, error) {
	res := set.Resource()
	entry := c.reg.Parent(res.GVR())
	if entry == nil || !entry.Served {
		return nil, &CaseError{Field: "resource", Err: fmt.Errorf("%s is not served: no test case names its kind", res.GVR())}
	}
	parent := in.Resource.DeepCopy()
	if parent.GetNamespace() == "" {
		parent.SetNamespace(metav1.NamespaceDefault)
	}
	if parent.GetUID() == "" {
		parent.SetUID(UID)
	}
	if parent.GetResourceVersion() == "" {
		parent.SetResourceVersion("1")
	}
	if parent.GetGeneration() == 0 {
		parent.SetGeneration(1)
	}
	inf := registry.InformerFor(entry.Informers, parent.GetNamespace())
	if inf == nil {
		return nil, &CaseError{Field: "resource", Err: fmt.Errorf("%s does not watch namespace %s (the entry's namespaces)", entry.Label, parent.GetNamespace())}
	}
	c.clear()
	if err := inf.GetIndexer().Add(parent); err != nil {
		return nil, err
	}
	observed := make([]*unstructured.Unstructured, len(in.Observed))
	for i, o := range in.Observed {
		o = adopt(o, parent)
		observed[i] = o
		kind := c.reg.Child(o.GroupVersionKind())
		if kind == nil {
			// The controller watches no such kind: a sync would never
			// see it, so the case would test nothing it does.
			return nil, &CaseError{Field: fmt.Sprintf("observed[%d]", i),
				Err: fmt.Errorf("%s %s: no entry renders a %s, so the controller never sees one", o.GetKind(), o.GetName(), o.GroupVersionKind())}
		}
		if ci := registry.InformerFor(kind.Informers, o.GetNamespace()); ci != nil {
			if err := ci.GetIndexer().Add(o); err != nil {
				return nil, err
			}
		}
	}
	rec := newRecorder(parent, observed)
	api := c.api
	watcher := staticWatcher{src: templates.NewStaticReads(in.Reads, parent.GetNamespace(), c.sets), mapper: c.mapper}
	if id := res.Identity; id != nil {
		ns, name := id.Account(parent.GetNamespace())
		var accounts []runtime.Object
		if in.RBAC == nil {
			accounts = append(accounts, account(ns, name))
		} else {
			r, err := newRBAC(in.RBAC)
			if err != nil {
				return nil, err
			}
			rec.rbac, watcher.rbac = r, r
			rec.finalizers = res.GVR().GroupVersion().WithResource(res.Resource)
			for _, u := range in.RBAC {
				if u.GetKind() == "ServiceAccount" {
					accounts = append(accounts, account(u.GetNamespace(), u.GetName()))
				}
			}
		}
		api = dynamicfake.NewSimpleDynamicClient(runtime.NewScheme(), accounts...)
	}
	rc := reconcile.New(reconcile.Options{Registry: c.reg, Dynamic: api, Writer: rec, Reads: watcher,
		Metrics: c.metrics, Enqueue: func(reconcile.Key) {},
		// The status this sync would write, written at once: a case has
		// no second sync to defer it to.
		FirstStatusDelay: -1,
		// A resource a rollout holds shows what it gets when it moves.
		PlanHeld: true,
	})
	key := reconcile.Key{GVR: res.GVR(), NamespacedName: types.NamespacedName{Namespace: parent.GetNamespace(), Name: parent.GetName()}}
	// What the sync logs is the controller's to an operator; a case
	// reports through its recording.
	after, err := requeue.Split(rc.Sync(klog.NewContext(ctx, logr.Discard()), key))
	rec.Err, rec.RequeueAfter = err, after
	return &rec.Recording, nil
}

// CaseError is a case Sync cannot run, naming the case's field at fault:
// a resource no entry serves, or an observed object of a kind no entry
// renders. It is the case file's error, not the sync's.
type CaseError struct {
	// Field is the case's field: "resource", or "observed[i]".
	Field string
	// Err says what is wrong with it.
	Err error
}

// Error implements error.
func (e *CaseError) Error() string { return e.Field + ": " + e.Err.Error() }

// Unwrap returns the cause.
func (e *CaseError) Unwrap() error { return e.Err }

// account is the ServiceAccount ns/name, as the API holds it.
func account(ns, name string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ServiceAccount",
		"metadata": map[string]any{"namespace": ns, "name": name}}}
}

// clear empties every cache of the registry: each case starts from what
// it gives alone.
func (c *Cluster) clear() {
	for _, res := range c.cfg.Resources {
		if entry := c.reg.Parent(res.GVR()); entry != nil {
			for _, inf := range entry.Informers {
				_ = inf.GetIndexer().Replace(nil, "")
			}
		}
	}
	for _, k := range c.reg.ChildKinds() {
		for _, inf := range k.Informers {
			_ = inf.GetIndexer().Replace(nil, "")
		}
	}
}

// adopt returns observed as the cache would hold it: in parent's
// namespace unless it names one, and, with no controller, parent's child
// as stencil writes it (controller reference, owner-uid label). It gets a
// UID and resourceVersion where it names none.
func adopt(observed *unstructured.Unstructured, parent *unstructured.Unstructured) *unstructured.Unstructured {
	o := observed.DeepCopy()
	if o.GetNamespace() == "" {
		o.SetNamespace(parent.GetNamespace())
	}
	if o.GetUID() == "" {
		o.SetUID(types.UID("uid-of-" + strings.ToLower(o.GetKind()) + "-" + o.GetName()))
	}
	if o.GetResourceVersion() == "" {
		o.SetResourceVersion("1")
	}
	if metav1.GetControllerOf(o) == nil {
		t := true
		o.SetOwnerReferences(append(o.GetOwnerReferences(), metav1.OwnerReference{APIVersion: parent.GetAPIVersion(), Kind: parent.GetKind(),
			Name: parent.GetName(), UID: parent.GetUID(), Controller: &t, BlockOwnerDeletion: &t}))
		labels := o.GetLabels()
		if labels == nil {
			labels = map[string]string{}
		}
		labels[contract.LabelOwnerUID] = string(parent.GetUID())
		labels[contract.LabelManagedBy] = contract.ManagedByValue
		o.SetLabels(labels)
	}
	return o
}

// mapper maps the config's kinds to resources without an API server: an
// entry's kind to its resource, a child kind to the resource the config
// names for it, else the plural guessed from the kind, namespaced unless
// it is a well-known cluster-scoped kind.
type mapper struct {
	*meta.DefaultRESTMapper
	cfg *config.Config
}

func newMapper(cfg *config.Config) *mapper {
	return &mapper{DefaultRESTMapper: meta.NewDefaultRESTMapper(nil), cfg: cfg}
}

// add maps an entry's kind to its resource.
func (m *mapper) add(gvk schema.GroupVersionKind, gvr schema.GroupVersionResource) {
	m.AddSpecific(gvk, gvr, gvr.GroupVersion().WithResource(strings.ToLower(gvk.Kind)), meta.RESTScopeNamespace)
}

// RESTMapping implements meta.RESTMapper.
func (m *mapper) RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	if r, err := m.DefaultRESTMapper.RESTMapping(gk, versions...); err == nil || len(versions) == 0 || versions[0] == "" {
		return r, err
	}
	gvk := gk.WithVersion(versions[0])
	gvr, _ := meta.UnsafeGuessKindToResource(gvk)
	for _, res := range m.cfg.Resources {
		if named, ok := res.ChildResource(gvk); ok {
			gvr = named
			break
		}
	}
	scope := meta.RESTScopeNamespace
	if kinds.IsClusterScoped(gk) {
		scope = meta.RESTScopeRoot
	}
	return &meta.RESTMapping{Resource: gvr, GroupVersionKind: gvk, Scope: scope}, nil
}

// staticWatcher is reconcile.ReadWatcher over a case's objects; nothing
// is tracked. With rbac, what the tenant names is read as the identity
// is, as the controller's watcher reviews it (reads.ForbiddenReadError);
// without, every identity reads them all.
type staticWatcher struct {
	src    *templates.StaticReads
	rbac   *rbac
	mapper meta.RESTMapper
}

// SourceAs implements reconcile.ReadWatcher: the case's objects as user
// may read them.
func (w staticWatcher) SourceAs(_ context.Context, user string) templates.ReadSource {
	if user == "" || w.rbac == nil {
		return w.src
	}
	return reviewedSource{w: w, user: user}
}

func (staticWatcher) Track(reads.Reader, []templates.ReadTarget)    {}
func (staticWatcher) Forget(reads.Reader)                           {}
func (staticWatcher) Retain(func(reads.Reader) bool)                {}
func (staticWatcher) Hold(func(string) bool)                        {}
func (staticWatcher) Cached(func(*unstructured.Unstructured, bool)) {}

// reviewedSource is a case's objects as user may read them.
type reviewedSource struct {
	w    staticWatcher
	user string
}

// review returns a *reads.ForbiddenReadError unless the source's user may
// verb what rd names in ns (name "": what a selector matches). Fixed reads
// are the platform's own, read as stencil.
func (s reviewedSource) review(rd config.Read, verb, ns, name string) error {
	if rd.Fixed() {
		return nil
	}
	m, err := s.w.mapper.RESTMapping(rd.GVK().GroupKind(), rd.GVK().Version)
	if err != nil {
		return err
	}
	if s.w.rbac.allowed(s.user, verb, m.Resource, "", ns, name) != nil {
		return &reads.ForbiddenReadError{User: s.user, Verb: verb, Resource: m.Resource.GroupResource(), Namespace: ns, Name: name}
	}
	return nil
}

// Get implements templates.ReadSource.
func (s reviewedSource) Get(rd config.Read, ns, name string) (*unstructured.Unstructured, error) {
	if err := s.review(rd, "get", ns, name); err != nil {
		return nil, err
	}
	return s.w.src.Get(rd, ns, name)
}

// List implements templates.ReadSource.
func (s reviewedSource) List(rd config.Read, ns string, sel labels.Selector) ([]*unstructured.Unstructured, error) {
	if err := s.review(rd, "list", ns, ""); err != nil {
		return nil, err
	}
	return s.w.src.List(rd, ns, sel)
}

// Served implements templates.ReadSource.
func (s reviewedSource) Served(gk schema.GroupKind) bool { return s.w.src.Served(gk) }
