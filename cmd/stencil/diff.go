package main

// "stencil diff": what a config would change in the live cluster, asked of
// the API server with dry-run applies, writing nothing.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/restmapper"

	"stencil.dev/stencil/controller"
	"stencil.dev/stencil/gvr"
	"stencil.dev/stencil/templates"
)

// Actions of a child in a diff.
const (
	actionCreate = "create"
	actionUpdate = "update"
	actionPrune  = "prune"
)

// Reasons of a resource the diff could not plan.
const (
	reasonRenderFailed = controller.ReasonRenderFailed
	reasonApplyFailed  = controller.ReasonApplyFailed
	reasonConflict     = controller.ReasonOwnershipConflict
)

func diffCommand(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("diff", "--config NEW.yaml [--kubeconfig F] [--namespace NS] [-o text|json]")
	config := fs.String("config", "stencil.yaml", "config `file` whose renders are compared with the live cluster")
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig `file`; empty uses $KUBECONFIG or the in-cluster config")
	namespace := fs.String("namespace", "", "diff only the resources of this `namespace` (default: each entry's namespaces, or all)")
	output := fs.String("o", "text", "output `format`: text or json")
	workers := fs.Int("workers", 8, "resources diffed in parallel")
	qps := fs.Float64("qps", 100, "client-side QPS limit towards the API server")
	burst := fs.Int("burst", 200, "client-side burst limit towards the API server")
	if status, done := parseFlags(fs, args, stdout, stderr); done {
		return status
	}
	if *output != "text" && *output != "json" {
		fmt.Fprintf(stderr, "stencil diff: -o %q: want text or json\n", *output)
		return exitUsage
	}
	if *workers < 1 {
		fmt.Fprintf(stderr, "stencil diff: --workers %d: want at least 1\n", *workers)
		return exitUsage
	}
	cfg, sets, ok := loadConfig(*config, stderr)
	if !ok {
		return exitUsage
	}
	restConfig, err := clientConfig(*kubeconfig)
	if err != nil {
		fmt.Fprintf(stderr, "stencil diff: loading kubeconfig: %v\n", err)
		return exitUsage
	}
	restConfig.QPS, restConfig.Burst = float32(*qps), *burst
	restConfig.UserAgent = "stencil-diff/" + version
	dyn, err := dynamic.NewForConfig(restConfig)
	if err != nil {
		fmt.Fprintf(stderr, "stencil diff: %v\n", err)
		return exitUsage
	}
	md, err := metadata.NewForConfig(restConfig)
	if err != nil {
		fmt.Fprintf(stderr, "stencil diff: %v\n", err)
		return exitUsage
	}
	disco, err := discovery.NewDiscoveryClientForConfig(restConfig)
	if err != nil {
		fmt.Fprintf(stderr, "stencil diff: %v\n", err)
		return exitUsage
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	d := &differ{
		sets: sets, dynamic: dyn, metadata: md,
		mapper:    restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disco)),
		namespace: *namespace, workers: *workers,
	}
	if isTerminal(stderr) {
		d.progress = stderr
	}
	report, err := d.run(ctx)
	if err != nil {
		fmt.Fprintf(stderr, "stencil diff: %s: %v\n", cfg.Path, err)
		return exitUsage
	}
	if *output == "json" {
		err = writeJSON(stdout, report)
	} else {
		err = writeText(stdout, report)
	}
	if err != nil {
		fmt.Fprintf(stderr, "stencil diff: %v\n", err)
		return exitUsage
	}
	return report.exitStatus()
}

// isTerminal reports whether w is a character device, so that a progress
// line rewritten in place does not end up in a log or a pipe.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// parentRef names the custom resource a child belongs to.
type parentRef struct {
	Resource  string `json:"resource"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
}

// fieldChange is one field path whose value would change.
type fieldChange struct {
	Path string
	// Old and New are the values; HasOld and HasNew say whether the field
	// exists at all before and after.
	Old, New       any
	HasOld, HasNew bool
}

// childDiff is one child that would be created, updated or pruned. The
// parent itself appears as an update when its status template would change
// a status field.
type childDiff struct {
	Parent          parentRef
	Kind            string
	Namespace, Name string
	Action          string
	Changes         []fieldChange
}

// failure is a resource, or a child of it, the diff could not plan.
type failure struct {
	Parent  parentRef
	Reason  string
	Message string
}

// diffReport is what a diff found.
type diffReport struct {
	Children  []childDiff
	Unchanged int
	Failures  []failure
}

// exitStatus is 0 when nothing would change, 1 when something would (or
// would fail to render or apply).
func (r *diffReport) exitStatus() int {
	if len(r.Children) > 0 || len(r.Failures) > 0 {
		return exitFailed
	}
	return exitOK
}

// count returns the number of children with the action.
func (r *diffReport) count(action string) int {
	n := 0
	for _, c := range r.Children {
		if c.Action == action {
			n++
		}
	}
	return n
}

// differ plans one config against the live cluster.
type differ struct {
	sets      []*templates.Set
	dynamic   dynamic.Interface
	metadata  metadata.Interface
	mapper    meta.RESTMapper
	namespace string
	workers   int
	// progress, when set, gets a progress line rewritten in place.
	progress io.Writer

	// owned maps a parent's UID to the live children labelled with it.
	owned map[types.UID][]ownedChild
}

// ownedChild is a live child found by its owner-uid label.
type ownedChild struct {
	gvk        schema.GroupVersionKind
	namespace  string
	name       string
	controller types.UID
}

// job is one custom resource to diff.
type job struct {
	set    *templates.Set
	parent *unstructured.Unstructured
}

// diffResult is what one resource contributes to the report.
type diffResult struct {
	children  []childDiff
	unchanged int
	failures  []failure
}

// run lists every resource the config serves, then diffs them with
// d.workers in parallel. Any error but a render or apply failure of one
// resource stops it: a partial plan would read as a complete one.
func (d *differ) run(ctx context.Context) (*diffReport, error) {
	var jobs []job
	for _, set := range d.sets {
		res := set.Resource()
		for _, ns := range controller.ScopeNamespaces(d.namespace, res.Namespaces) {
			items, err := listAll(ctx, d.dynamic.Resource(res.GVR()).Namespace(ns), res.LabelSelector().String())
			if err != nil {
				return nil, fmt.Errorf("listing %s: %w", res, err)
			}
			for i := range items {
				jobs = append(jobs, job{set: set, parent: &items[i]})
			}
		}
	}
	if err := d.listOwned(ctx); err != nil {
		return nil, err
	}

	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	results := make([]diffResult, len(jobs))
	next := make(chan int)
	var done atomic.Int64
	var wg sync.WaitGroup
	for range min(d.workers, max(len(jobs), 1)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				r, err := d.diffOne(ctx, jobs[i])
				if err != nil {
					cancel(err)
					continue
				}
				results[i] = r
				done.Add(1)
			}
		}()
	}
	stopProgress := d.showProgress(&done, len(jobs))
feed:
	for i := range jobs {
		select {
		case next <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	stopProgress()
	if err := context.Cause(ctx); err != nil {
		return nil, err
	}

	report := &diffReport{Children: []childDiff{}, Failures: []failure{}}
	for _, r := range results {
		report.Children = append(report.Children, r.children...)
		report.Unchanged += r.unchanged
		report.Failures = append(report.Failures, r.failures...)
	}
	return report, nil
}

// showProgress rewrites a progress line on d.progress until the returned
// function is called, which clears it.
func (d *differ) showProgress(done *atomic.Int64, total int) func() {
	if d.progress == nil {
		return func() {}
	}
	stop := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				fmt.Fprint(d.progress, "\r\033[K")
				return
			case <-tick.C:
				fmt.Fprintf(d.progress, "\rstencil diff: %d/%d resources", done.Load(), total)
			}
		}
	}()
	return func() { close(stop); <-finished }
}

// listAll lists every object of a resource, a page at a time.
func listAll(ctx context.Context, client dynamic.ResourceInterface, selector string) ([]unstructured.Unstructured, error) {
	var items []unstructured.Unstructured
	opts := metav1.ListOptions{LabelSelector: selector, Limit: 500}
	for {
		list, err := client.List(ctx, opts)
		if err != nil {
			return nil, err
		}
		items = append(items, list.Items...)
		if opts.Continue = list.GetContinue(); opts.Continue == "" {
			return items, nil
		}
	}
}

// listOwned finds the live children of every child kind the config renders,
// by stencil's owner-uid label, reading metadata only: what prune would
// delete needs no more.
func (d *differ) listOwned(ctx context.Context) error {
	d.owned = map[types.UID][]ownedChild{}
	type scope struct {
		gvk schema.GroupVersionKind
		ns  string
	}
	seen := map[scope]bool{}
	for _, set := range d.sets {
		for _, gvk := range set.Kinds() {
			mapping, err := d.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
			if meta.IsNoMatchError(err) {
				// Not served: no child of the kind exists to prune.
				continue
			}
			if err != nil {
				return fmt.Errorf("looking up kind %s: %w", gvk, err)
			}
			for _, ns := range controller.ScopeNamespaces(d.namespace, set.Resource().Namespaces) {
				if seen[scope{gvk, ns}] || seen[scope{gvk, metav1.NamespaceAll}] {
					continue
				}
				seen[scope{gvk, ns}] = true
				opts := metav1.ListOptions{LabelSelector: templates.LabelOwnerUID, Limit: 500}
				for {
					list, err := d.metadata.Resource(mapping.Resource).Namespace(ns).List(ctx, opts)
					if err != nil {
						return fmt.Errorf("listing %s: %w", mapping.Resource.Resource, err)
					}
					for _, o := range list.Items {
						c := ownedChild{gvk: gvk, namespace: o.Namespace, name: o.Name}
						if ref := metav1.GetControllerOf(&o); ref != nil {
							c.controller = ref.UID
						}
						uid := types.UID(o.Labels[templates.LabelOwnerUID])
						d.owned[uid] = append(d.owned[uid], c)
					}
					if opts.Continue = list.Continue; opts.Continue == "" {
						break
					}
				}
			}
		}
	}
	return nil
}

// diffOne renders one resource and asks the API server, for each child,
// what applying it would change. The error is for what stops the whole
// diff; a failure of this resource alone is in the result.
func (d *differ) diffOne(ctx context.Context, j job) (diffResult, error) {
	res := j.set.Resource()
	parent := j.parent
	ref := parentRef{Resource: res.Resource, Namespace: parent.GetNamespace(), Name: parent.GetName()}
	var r diffResult
	fail := func(reason string, err error) (diffResult, error) {
		r.failures = append(r.failures, failure{Parent: ref, Reason: reason, Message: oneLine(err.Error())})
		return r, nil
	}
	if parent.GetDeletionTimestamp() != nil || parent.GetAnnotations()[controller.AnnotationPaused] == "true" {
		// The controller leaves these alone, and so would the new config.
		return r, nil
	}
	obj, err := gvr.NewObject(parent, res.GVR())
	if err != nil {
		return fail(reasonRenderFailed, err)
	}
	desired, err := j.set.Render(obj)
	if err != nil {
		return fail(reasonRenderFailed, err)
	}
	extra, err := j.set.RenderStatus(obj)
	if err != nil {
		return fail(reasonRenderFailed, err)
	}

	rendered := map[schema.GroupVersionKind]map[string]bool{}
	for _, want := range desired {
		gvk := want.GroupVersionKind()
		if rendered[gvk] == nil {
			rendered[gvk] = map[string]bool{}
		}
		rendered[gvk][want.GetName()] = true
		c, reason, err := d.diffChild(ctx, parent, want)
		switch {
		case err != nil && reason == "":
			return r, err
		case err != nil:
			r.failures = append(r.failures, failure{Parent: ref, Reason: reason,
				Message: oneLine(fmt.Sprintf("%s/%s: %v", want.GetKind(), want.GetName(), err))})
		case c == nil:
			r.unchanged++
		default:
			c.Parent = ref
			r.children = append(r.children, *c)
		}
	}

	// Status: the fields the status template renders.
	if changes := statusChanges(parent, controller.TemplateStatus(parent, extra)); len(changes) > 0 {
		r.children = append(r.children, childDiff{Parent: ref, Kind: parent.GetKind(),
			Namespace: parent.GetNamespace(), Name: parent.GetName(), Action: actionUpdate, Changes: changes})
	}

	// Prune: live children of the entry's kinds, controlled by this
	// resource, that the render no longer produces.
	var pruned []childDiff
	for _, c := range d.owned[parent.GetUID()] {
		if c.namespace != parent.GetNamespace() || c.controller != parent.GetUID() ||
			!slices.Contains(j.set.Kinds(), c.gvk) || rendered[c.gvk][c.name] {
			continue
		}
		pruned = append(pruned, childDiff{Parent: ref, Kind: c.gvk.Kind, Namespace: c.namespace, Name: c.name, Action: actionPrune})
	}
	sort.Slice(pruned, func(a, b int) bool {
		return pruned[a].Kind+"/"+pruned[a].Name < pruned[b].Kind+"/"+pruned[b].Name
	})
	r.children = append(r.children, pruned...)
	return r, nil
}

// diffChild asks what applying want would do: nil when nothing would
// change. An error with a reason is a failure of this child alone (the
// API server rejects it, or a foreign object holds its name); an error
// without one stops the diff.
func (d *differ) diffChild(ctx context.Context, parent, want *unstructured.Unstructured) (*childDiff, string, error) {
	gvk := want.GroupVersionKind()
	mapping, err := d.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if meta.IsNoMatchError(err) {
		return nil, reasonApplyFailed, fmt.Errorf("kind %s is not served by the API server (is its CRD installed?)", gvk)
	}
	if err != nil {
		return nil, "", fmt.Errorf("looking up kind %s: %w", gvk, err)
	}
	client := d.dynamic.Resource(mapping.Resource).Namespace(want.GetNamespace())
	c := &childDiff{Kind: want.GetKind(), Namespace: want.GetNamespace(), Name: want.GetName()}
	live, err := client.Get(ctx, want.GetName(), metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		live = nil
		c.Action = actionCreate
	case err != nil:
		return nil, "", fmt.Errorf("reading %s/%s: %w", want.GetKind(), want.GetName(), err)
	default:
		if ref := metav1.GetControllerOf(live); ref == nil || ref.UID != parent.GetUID() {
			return nil, reasonConflict, fmt.Errorf("exists and is not controlled by %s %s", parent.GetKind(), parent.GetName())
		}
		c.Action = actionUpdate
	}
	// A create is dry-run too: the API server may reject the object.
	result, err := controller.DryRunApply(ctx, client, want)
	if err != nil {
		if apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) {
			return nil, reasonApplyFailed, err
		}
		return nil, "", fmt.Errorf("dry-run apply of %s/%s: %w", want.GetKind(), want.GetName(), err)
	}
	if live == nil {
		return c, "", nil
	}
	c.Changes = objectChanges(live.Object, result.Object)
	if len(c.Changes) == 0 {
		return nil, "", nil
	}
	return c, "", nil
}

// oneLine joins the lines of a (joined) error message.
func oneLine(s string) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(s, "\n", "; ")), " ")
}

// ignoredMetadata are the metadata fields that change on every write, or
// are stencil's bookkeeping, not a change a person reviews.
var ignoredMetadata = []string{"managedFields", "resourceVersion", "generation", "uid", "creationTimestamp"}

// objectChanges lists the fields that differ between two versions of an
// object, leaving out status and the bookkeeping metadata.
func objectChanges(old, new map[string]any) []fieldChange {
	strip := func(m map[string]any) map[string]any {
		out := make(map[string]any, len(m))
		for k, v := range m {
			if k != "status" {
				out[k] = v
			}
		}
		if md, ok := m["metadata"].(map[string]any); ok {
			c := make(map[string]any, len(md))
			for k, v := range md {
				if !slices.Contains(ignoredMetadata, k) {
					c[k] = v
				}
			}
			if a, ok := md["annotations"].(map[string]any); ok {
				ac := make(map[string]any, len(a))
				for k, v := range a {
					if k != controller.AnnotationAppliedHash {
						ac[k] = v
					}
				}
				c["annotations"] = ac
				if len(ac) == 0 {
					delete(c, "annotations")
				}
			}
			out["metadata"] = c
		}
		return out
	}
	var changes []fieldChange
	walk("", strip(old), strip(new), true, true, &changes)
	return changes
}

// statusChanges lists the status fields that differ between the live
// resource and want.
func statusChanges(parent *unstructured.Unstructured, want map[string]any) []fieldChange {
	live, _ := parent.Object["status"].(map[string]any)
	if live == nil {
		live = map[string]any{}
	}
	var changes []fieldChange
	walk("status", live, want, true, true, &changes)
	return changes
}

// walk appends to out every leaf path where old and new differ. A subtree
// present on one side only is one change. List elements are matched by
// their name when every element has a distinct one, else by index.
func walk(path string, old, new any, hasOld, hasNew bool, out *[]fieldChange) {
	if hasOld && hasNew {
		om, oIsMap := old.(map[string]any)
		nm, nIsMap := new.(map[string]any)
		if oIsMap && nIsMap {
			keys := make([]string, 0, len(om)+len(nm))
			for k := range om {
				keys = append(keys, k)
			}
			for k := range nm {
				if _, ok := om[k]; !ok {
					keys = append(keys, k)
				}
			}
			sort.Strings(keys)
			for _, k := range keys {
				ov, ook := om[k]
				nv, nok := nm[k]
				walk(joinKey(path, k), ov, nv, ook, nok, out)
			}
			return
		}
		ol, oIsList := old.([]any)
		nl, nIsList := new.([]any)
		if oIsList && nIsList {
			walkList(path, ol, nl, out)
			return
		}
		if reflect.DeepEqual(old, new) {
			return
		}
	}
	*out = append(*out, fieldChange{Path: path, Old: old, New: new, HasOld: hasOld, HasNew: hasNew})
}

// walkList compares two lists, by element name when both are lists of
// uniquely named objects (containers, ports, env, volumes).
func walkList(path string, old, new []any, out *[]fieldChange) {
	oNames, oKeyed := names(old)
	nNames, nKeyed := names(new)
	if !oKeyed || !nKeyed {
		for i := range max(len(old), len(new)) {
			var ov, nv any
			if i < len(old) {
				ov = old[i]
			}
			if i < len(new) {
				nv = new[i]
			}
			walk(fmt.Sprintf("%s[%d]", path, i), ov, nv, i < len(old), i < len(new), out)
		}
		return
	}
	byName := make(map[string]any, len(old))
	for i, n := range oNames {
		byName[n] = old[i]
	}
	for i, n := range nNames {
		ov, ok := byName[n]
		walk(path+"[name="+n+"]", ov, new[i], ok, true, out)
	}
	for i, n := range oNames {
		if !slices.Contains(nNames, n) {
			walk(path+"[name="+n+"]", old[i], nil, true, false, out)
		}
	}
	// Order matters too: containers reordered make a new pod template.
	kept := func(names, other []string) []any {
		var out []any
		for _, n := range names {
			if slices.Contains(other, n) {
				out = append(out, n)
			}
		}
		return out
	}
	if o, n := kept(oNames, nNames), kept(nNames, oNames); !reflect.DeepEqual(o, n) {
		*out = append(*out, fieldChange{Path: path, Old: o, New: n, HasOld: true, HasNew: true})
	}
}

// names returns the name of each element, and whether every element is an
// object with a distinct string name.
func names(list []any) ([]string, bool) {
	out := make([]string, 0, len(list))
	for _, e := range list {
		m, ok := e.(map[string]any)
		if !ok {
			return nil, false
		}
		n, ok := m["name"].(string)
		if !ok || slices.Contains(out, n) {
			return nil, false
		}
		out = append(out, n)
	}
	return out, true
}

// joinKey appends a map key to a path; a key that would read as more than
// one step (an annotation such as stencil.dev/paused) is quoted.
func joinKey(path, k string) string {
	if strings.ContainsAny(k, ".[]=\" \t") {
		return path + "[" + fmt.Sprintf("%q", k) + "]"
	}
	if path == "" {
		return k
	}
	return path + "." + k
}

// formatValue prints a value for the text output: strings bare, other
// values as JSON, an absent field as <none>.
func formatValue(v any, present bool) string {
	if !present {
		return "<none>"
	}
	if s, ok := v.(string); ok && s != "" && !strings.ContainsAny(s, " \n") {
		return s
	}
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(data)
}

// change prints one field change as "path old -> new".
func (c fieldChange) String() string {
	return c.Path + " " + formatValue(c.Old, c.HasOld) + " -> " + formatValue(c.New, c.HasNew)
}

// group is children of one kind with the same action and the same changes.
type group struct {
	action  string
	kind    string
	changes []fieldChange
	objects []string // namespace/name
}

// groupChildren groups identical changes, so that 412 Deployments whose
// image changes read as one line: by action, kind, then first object.
func groupChildren(children []childDiff) []*group {
	byKey := map[string]*group{}
	var groups []*group
	for _, c := range children {
		lines := make([]string, len(c.Changes))
		for i, ch := range c.Changes {
			lines[i] = ch.String()
		}
		key := c.Action + "\x00" + c.Kind + "\x00" + strings.Join(lines, "\x00")
		g, ok := byKey[key]
		if !ok {
			g = &group{action: c.Action, kind: c.Kind, changes: c.Changes}
			byKey[key] = g
			groups = append(groups, g)
		}
		g.objects = append(g.objects, c.Namespace+"/"+c.Name)
	}
	rank := map[string]int{actionCreate: 0, actionUpdate: 1, actionPrune: 2}
	for _, g := range groups {
		sort.Strings(g.objects)
	}
	sort.SliceStable(groups, func(a, b int) bool {
		ga, gb := groups[a], groups[b]
		if ga.action != gb.action {
			return rank[ga.action] < rank[gb.action]
		}
		if ga.kind != gb.kind {
			return ga.kind < gb.kind
		}
		return ga.objects[0] < gb.objects[0]
	})
	return groups
}

// maxNamesShown bounds the objects named under a group.
const maxNamesShown = 10

// writeText prints the groups, the failures and the summary line.
func writeText(w io.Writer, r *diffReport) error {
	var b strings.Builder
	symbol := map[string]string{actionCreate: "+", actionUpdate: "~", actionPrune: "-"}
	for _, g := range groupChildren(r.Children) {
		fmt.Fprintf(&b, "%s %s %d %s", symbol[g.action], g.action, len(g.objects), kindNoun(g.kind, len(g.objects)))
		switch len(g.changes) {
		case 0:
			b.WriteString("\n")
		case 1:
			fmt.Fprintf(&b, ": %s\n", g.changes[0])
		default:
			b.WriteString(":\n")
			for _, c := range g.changes {
				fmt.Fprintf(&b, "    %s\n", c)
			}
		}
		shown := g.objects[:min(len(g.objects), maxNamesShown)]
		fmt.Fprintf(&b, "    on %s", strings.Join(shown, ", "))
		if more := len(g.objects) - len(shown); more > 0 {
			fmt.Fprintf(&b, " and %d more", more)
		}
		b.WriteString("\n")
	}
	for _, f := range r.Failures {
		fmt.Fprintf(&b, "%s/%s: %s: %s\n", f.Parent.Namespace, f.Parent.Name, f.Reason, f.Message)
	}
	s := r.summary()
	fmt.Fprintf(&b, "%d to create, %d to update, %d to prune, %d unchanged, %d render failures",
		s.Create, s.Update, s.Prune, s.Unchanged, s.RenderFailed)
	if s.ApplyFailed > 0 {
		fmt.Fprintf(&b, ", %d apply failures", s.ApplyFailed)
	}
	b.WriteString("\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// kindNoun is the kind, in the plural for n != 1, for reading only.
func kindNoun(kind string, n int) string {
	switch {
	case n == 1:
		return kind
	case strings.HasSuffix(kind, "y") && !strings.HasSuffix(kind, "ay"):
		return kind[:len(kind)-1] + "ies"
	case strings.HasSuffix(kind, "s"), strings.HasSuffix(kind, "x"):
		return kind + "es"
	}
	return kind + "s"
}

// summary counts, as -o json prints them.
type summary struct {
	Create       int `json:"create"`
	Update       int `json:"update"`
	Prune        int `json:"prune"`
	Unchanged    int `json:"unchanged"`
	RenderFailed int `json:"renderFailed"`
	// ApplyFailed counts children the API server rejects, and children
	// whose name a foreign object holds.
	ApplyFailed int `json:"applyFailed"`
}

func (r *diffReport) summary() summary {
	s := summary{Create: r.count(actionCreate), Update: r.count(actionUpdate), Prune: r.count(actionPrune), Unchanged: r.Unchanged}
	for _, f := range r.Failures {
		if f.Reason == reasonRenderFailed {
			s.RenderFailed++
		} else {
			s.ApplyFailed++
		}
	}
	return s
}

// jsonChild is one element of "children" in -o json.
type jsonChild struct {
	Parent parentRef `json:"parent"`
	Kind   string    `json:"kind"`
	Name   string    `json:"name"`
	Action string    `json:"action"`
	Fields []string  `json:"fields"`
}

// jsonFailure is one element of "renderFailures" in -o json.
type jsonFailure struct {
	Parent  parentRef `json:"parent"`
	Reason  string    `json:"reason"`
	Message string    `json:"message"`
}

// writeJSON prints the report in DESIGN.md's schema, plus the failures.
func writeJSON(w io.Writer, r *diffReport) error {
	out := struct {
		Children       []jsonChild   `json:"children"`
		Summary        summary       `json:"summary"`
		RenderFailures []jsonFailure `json:"renderFailures"`
	}{Children: []jsonChild{}, Summary: r.summary(), RenderFailures: []jsonFailure{}}
	for _, c := range r.Children {
		fields := make([]string, len(c.Changes))
		for i, ch := range c.Changes {
			fields[i] = ch.Path
		}
		out.Children = append(out.Children, jsonChild{Parent: c.Parent, Kind: c.Kind, Name: c.Name, Action: c.Action, Fields: fields})
	}
	for _, f := range r.Failures {
		out.RenderFailures = append(out.RenderFailures, jsonFailure(f))
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(out); err != nil {
		return fmt.Errorf("writing JSON: %w", err)
	}
	return nil
}
