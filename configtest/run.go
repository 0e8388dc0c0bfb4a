package configtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"stencil.dev/stencil/config"
	"stencil.dev/stencil/contract"
	"stencil.dev/stencil/controller/offline"
	"stencil.dev/stencil/controller/reconcile/status"
	"stencil.dev/stencil/templates"
)

// Options are the flags of "stencil test".
type Options struct {
	// Update rewrites every golden file with what the case renders.
	Update bool
	// Run, when set, runs only the cases whose ID (file: name) it matches.
	Run *regexp.Regexp
}

// Runner runs cases against one loaded config.
type Runner struct {
	cfg     *config.Config
	sets    []*templates.Set
	schemas *schemas
	opts    Options
	// kinds are the kinds the cases' resources name, by resource: the
	// kind of an entry that generates no CRD.
	kinds map[schema.GroupVersionResource]string
	// cluster is the registry the cases sync against, built at the first
	// case (clusterFor).
	cluster *offline.Cluster
}

// NewRunner returns a Runner over cfg and its sets, as loaded. An error is
// a generated CRD the API server would refuse (a CEL rule that does not
// compile, or costs too much): "stencil test" exits 2.
func NewRunner(ctx context.Context, cfg *config.Config, sets []*templates.Set, opts Options) (*Runner, error) {
	sch, err := newSchemas(ctx, templates.Entries(sets))
	if err != nil {
		return nil, err
	}
	return &Runner{cfg: cfg, sets: sets, schemas: sch, opts: opts, kinds: map[schema.GroupVersionResource]string{}}, nil
}

// Close stops what the cases ran against.
func (r *Runner) Close() {
	if r.cluster != nil {
		r.cluster.Close()
	}
}

// clusterFor returns the cluster the cases sync against, built once.
func (r *Runner) clusterFor(ctx context.Context) (*offline.Cluster, error) {
	if r.cluster == nil {
		c, err := offline.New(ctx, r.cfg, r.sets, r.kinds)
		if err != nil {
			return nil, fmt.Errorf("building the cluster the cases run against: %w", err)
		}
		r.cluster = c
	}
	return r.cluster, nil
}

// Result is what one case came to.
type Result struct {
	// Case is the case; Skipped says -run left it out.
	Case    *Case
	Skipped bool
	// Failures say why the case failed, each a paragraph; none: passed.
	Failures []string
	// Updated says --update rewrote the case's golden file.
	Updated bool
	// Took is how long the case ran.
	Took time.Duration
}

// Passed says whether the case passed (or was skipped).
func (r *Result) Passed() bool { return len(r.Failures) == 0 }

// rendered is one render of a case: what the controller would apply, and
// the status it would patch.
type rendered struct {
	children []*unstructured.Unstructured
	status   map[string]any
	waits    []string
	// events are the events the sync records; pruned the children it
	// deletes, as Kind/name.
	events, pruned []string
}

// Run runs every case of the files, in order, and returns their results.
// An error is a case that cannot run for its test file's fault (its
// assertions do not compile, no entry serves its resource): "stencil
// test" exits 2.
func (r *Runner) Run(ctx context.Context, files []*File) ([]*Result, error) {
	progs, err := compileAssertions(files)
	if err != nil {
		return nil, err
	}
	for _, f := range files {
		for _, c := range f.Cases {
			if set, err := r.findSet(c); err == nil {
				r.kinds[set.Resource().GVR()] = c.resource.GetKind()
			}
		}
	}
	var out []*Result
	for _, f := range files {
		for _, c := range f.Cases {
			res := &Result{Case: c}
			out = append(out, res)
			if r.opts.Run != nil && !r.opts.Run.MatchString(c.ID()) {
				res.Skipped = true
				continue
			}
			start := time.Now()
			if err := r.runCase(ctx, c, progs[c], res); err != nil {
				return nil, err
			}
			res.Took = time.Since(start)
		}
	}
	return out, nil
}

// runCase runs c into res.
func (r *Runner) runCase(ctx context.Context, c *Case, progs []*assertion, res *Result) error {
	fail := func(format string, args ...any) { res.Failures = append(res.Failures, fmt.Sprintf(format, args...)) }
	set, err := r.findSet(c)
	if err != nil {
		return &FileError{File: c.file, Field: fmt.Sprintf("cases[%d] (%s).resource", c.index, c.Name), Err: err}
	}
	if len(c.rbac) > 0 && set.Resource().Identity == nil {
		return &FileError{File: c.file, Field: fmt.Sprintf("cases[%d] (%s).rbac", c.index, c.Name),
			Err: fmt.Errorf("the entry %s has no identity: its children are written as stencil, which RBAC objects of a case do not govern", set.Resource().GVR().GroupResource())}
	}
	// The resource as the API server stores it, defaults applied: what
	// the controller reads, so what renders and what assertions see.
	resource, refused := r.schemas.admitResource(ctx, set, c.resource)
	if c.Error != "" && slices.ContainsFunc(refused, func(p string) bool { return strings.Contains(p, c.Error) }) {
		// What the case expects: the API server refuses the resource,
		// and stencil never sees it.
		return nil
	}
	for _, p := range refused {
		fail("the resource is refused by its entry's CRD: %s", p)
	}
	first, err := r.render(ctx, set, resource, c)
	if ce := (*offline.CaseError)(nil); errors.As(err, &ce) {
		return &FileError{File: c.file, Field: fmt.Sprintf("cases[%d] (%s).%s", c.index, c.Name, ce.Field), Err: ce.Err}
	}
	if c.Error != "" {
		switch {
		case err == nil:
			fail("want a render that fails with %q; it rendered %d children", c.Error, len(first.children))
		case !strings.Contains(err.Error(), c.Error):
			fail("want a render that fails with %q; it failed with:\n%s", c.Error, indent(err.Error()))
		}
		return nil
	}
	if err != nil {
		fail("the render failed:\n%s", indent(err.Error()))
		return nil
	}
	if second, err := r.render(ctx, set, resource, c); err != nil {
		fail("the second render failed (the first did not):\n%s", indent(err.Error()))
	} else if path, a, b, differ := firstDifference(first.document(nil), second.document(nil)); differ {
		fail("two renders differ at %s: %s, then %s (a random value, or a map's order?)", path, show(a), show(b))
	}
	for _, u := range first.children {
		for _, p := range r.schemas.checkObject(ctx, u) {
			fail("%s %s: %s", u.GetKind(), u.GetName(), p)
		}
	}
	if c.Golden != "" {
		r.golden(c, resource, first, res)
	}
	for _, a := range progs {
		if msg := a.check(first, resource); msg != "" {
			fail("%s", msg)
		}
	}
	return nil
}

// findSet returns the set of the entry that serves c's resource.
func (r *Runner) findSet(c *Case) (*templates.Set, error) {
	return templates.FindSet(r.cfg.Path, r.sets, c.resource, c.Entry)
}

// render runs the controller's sync of c's resource, as stored, once
// (package offline): the children it applies, given the observed ones, the
// status it patches, and what it waits for, reports and prunes. An error
// is what the sync failed with (a render that failed, a child refused);
// the status then says so too.
func (r *Runner) render(ctx context.Context, set *templates.Set, resource *unstructured.Unstructured, c *Case) (*rendered, error) {
	cluster, err := r.clusterFor(ctx)
	if err != nil {
		return nil, err
	}
	rec, err := cluster.Sync(ctx, set, offline.Case{Resource: resource, Observed: c.observed, Reads: c.reads, RBAC: c.rbac})
	if err != nil {
		return nil, err
	}
	out := &rendered{status: rec.Status, events: rec.Events, pruned: rec.Pruned}
	if o := rec.Outcome; o != nil {
		if o.Render != nil {
			out.children = make([]*unstructured.Unstructured, len(o.Render.Children))
			for i, ch := range o.Render.Children {
				out.children[i] = withoutHash(ch)
			}
			for _, w := range o.Render.Waits {
				out.waits = append(out.waits, w.String())
			}
		}
		if o.Status.WaitingForRead != "" {
			out.waits = append(out.waits, o.Status.WaitingForRead)
		}
	}
	maskTimes(out.status)
	if rec.Err != nil && renderFailed(rec) {
		return out, rec.Err
	}
	// Any other failure of the sync (a write the identity may not make,
	// an account that does not exist, a foreign object holding a name) is
	// what the controller would report, and the case checks it as such:
	// in the status, the events and the golden file.
	return out, nil
}

// renderFailed reports whether the sync failed because the render did:
// what a case's error field expects, and any other case fails on.
func renderFailed(rec *offline.Recording) bool {
	if rec.Outcome == nil {
		return true
	}
	switch rec.Outcome.Status.FailReason {
	case status.ReasonRenderFailed, status.ReasonRenderKilled:
		return true
	}
	return false
}

// withoutHash returns a copy of a child as the sync applies it, without
// the applied-hash annotation: a digest of the rest, it changes with any
// change and would head every golden diff with a line no reviewer can
// read.
func withoutHash(u *unstructured.Unstructured) *unstructured.Unstructured {
	u = u.DeepCopy()
	if a := u.GetAnnotations(); a != nil {
		delete(a, contract.AnnotationAppliedHash)
		if len(a) == 0 {
			a = nil
		}
		u.SetAnnotations(a)
	}
	return u
}

// maskTimes replaces each condition's lastTransitionTime, the time of the
// run, so that a golden file and two renders compare.
func maskTimes(st map[string]any) {
	conds, _ := st["conditions"].([]any)
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok {
			if _, ok := m["lastTransitionTime"]; ok {
				m["lastTransitionTime"] = "<time of the run>"
			}
		}
	}
}

// document is the render as one object, the golden file's content: the
// children in render order and the status; each ignored path shown as
// ignored.
func (r *rendered) document(ignore []string) map[string]any {
	children := make([]any, len(r.children))
	for i, c := range r.children {
		obj := runtime.DeepCopyJSON(c.Object)
		for _, p := range ignore {
			ignorePath(obj, strings.Split(p, "."))
		}
		children[i] = obj
	}
	doc := map[string]any{"children": children, "status": runtime.DeepCopyJSONValue(r.status)}
	for name, list := range map[string][]string{"waits": r.waits, "events": r.events, "pruned": r.pruned} {
		if len(list) > 0 {
			l := make([]any, len(list))
			for i, w := range list {
				l[i] = w
			}
			doc[name] = l
		}
	}
	return doc
}

// ignorePath replaces the value at path in obj, where there is one.
func ignorePath(obj map[string]any, path []string) {
	for i, k := range path {
		v, ok := obj[k]
		if !ok {
			return
		}
		if i == len(path)-1 {
			obj[k] = "<ignored>"
			return
		}
		if obj, ok = v.(map[string]any); !ok {
			return
		}
	}
}

// golden compares the render with c's golden file, or writes it. The
// file's path was resolved inside the test's roots when the file loaded;
// messages name it as the test file does.
func (r *Runner) golden(c *Case, resource *unstructured.Unstructured, got *rendered, res *Result) {
	path, name := c.golden, c.goldenName
	data, err := yaml.Marshal(got.document(c.Ignore))
	if err != nil {
		res.Failures = append(res.Failures, err.Error())
		return
	}
	if r.opts.Update {
		old, _ := os.ReadFile(path)
		if string(old) != string(data) {
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err == nil {
				err = os.WriteFile(path, data, 0o644)
			}
			if err != nil {
				res.Failures = append(res.Failures, fmt.Sprintf("writing %s: %v", name, err))
				return
			}
			res.Updated = true
		}
		return
	}
	want, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		res.Failures = append(res.Failures, fmt.Sprintf("golden file %s does not exist (stencil test --update writes it)", name))
		return
	}
	if err != nil {
		res.Failures = append(res.Failures, err.Error())
		return
	}
	if string(want) != string(data) {
		res.Failures = append(res.Failures, fmt.Sprintf("the render differs from %s (--update rewrites it):\n%s", name,
			indent(goldenDiff(name, "render", string(want), string(data), objectLabel(resource)))))
	}
}

// firstDifference returns the first path where a and b differ.
func firstDifference(a, b any) (path string, x, y any, differ bool) {
	var walk func(p string, a, b any) bool
	walk = func(p string, a, b any) bool {
		am, aok := a.(map[string]any)
		bm, bok := b.(map[string]any)
		if aok && bok {
			keys := map[string]bool{}
			for k := range am {
				keys[k] = true
			}
			for k := range bm {
				keys[k] = true
			}
			sorted := make([]string, 0, len(keys))
			for k := range keys {
				sorted = append(sorted, k)
			}
			slices.Sort(sorted)
			for _, k := range sorted {
				if walk(join(p, k), am[k], bm[k]) {
					return true
				}
			}
			return false
		}
		al, aok := a.([]any)
		bl, bok := b.([]any)
		if aok && bok && len(al) == len(bl) {
			for i := range al {
				if walk(fmt.Sprintf("%s[%d]", p, i), al[i], bl[i]) {
					return true
				}
			}
			return false
		}
		if !reflect.DeepEqual(a, b) {
			path, x, y = p, a, b
			return true
		}
		return false
	}
	differ = walk("", a, b)
	return path, x, y, differ
}

// join appends key k to path p.
func join(p, k string) string {
	if p == "" {
		return k
	}
	return p + "." + k
}

// show prints a value short.
func show(v any) string {
	b, err := yaml.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	s := strings.TrimSpace(string(b))
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return s
}

// indent indents every line of s by four spaces.
func indent(s string) string {
	return "    " + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n    ")
}
