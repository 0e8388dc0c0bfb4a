package templates

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"text/template"
	"text/template/parse"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"

	"stencil.dev/stencil/config"
	"stencil.dev/stencil/templates/engine"
	"stencil.dev/stencil/templates/readview"
	"stencil.dev/stencil/templates/view"
)

// Reading what the resource does not own (DESIGN.md, "reads"). The
// caller resolves an entry's reads before the render (ResolveReads: the
// computed names and selectors rendered over the resource, the objects
// taken from its ReadSource), and the render sees the result in
// view.Object.Reads: `read "handle"` in own templates, Helm's lookup in
// chart mode. The render itself asks nothing: a render worker holds no
// cache, and one render reads one consistent set of objects.
//
// What a template sees of a read object is readview.View's (package readview): an
// allowlist, which the read informers' transform applies too.

// funcRead is the template function that returns a read.
const funcRead = "read"

// ReadSource is where ResolveReads finds the objects: the controller's
// caches, or the files of stencil render --reads.
type ReadSource interface {
	// Get returns the object of rd's kind, or nil when none exists.
	Get(rd config.Read, namespace, name string) (*unstructured.Unstructured, error)
	// List returns the objects of rd's kind in namespace whose labels sel
	// matches.
	List(rd config.Read, namespace string, sel labels.Selector) ([]*unstructured.Unstructured, error)
	// Served reports whether stencil serves the kind (a configured
	// resource): its status is not part of what a read sees.
	Served(gk schema.GroupKind) bool
}

// ReadRef names one object a render read, as status.reads lists it.
type ReadRef struct {
	// APIVersion, Kind, Namespace and Name name the object.
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Namespace  string `json:"namespace"`
	Name       string `json:"name"`
	// ResourceVersion is the object's as read (empty for a kind stencil
	// serves).
	ResourceVersion string `json:"resourceVersion,omitempty"`
	// Generation names what was read of a kind stencil serves instead of
	// its resourceVersion (refOf).
	Generation int64 `json:"generation,omitempty"`
}

// String reads "ConfigMap stencil-system/platform-defaults".
func (r ReadRef) String() string { return r.Kind + " " + r.Namespace + "/" + r.Name }

// ReadTarget is what one read looked for: one object by name, or the
// objects a selector matches; what the controller indexes its readers by.
type ReadTarget struct {
	// Read is the declared read.
	Read config.Read
	// Namespace is where it looked.
	Namespace string
	// Name is the object's name; empty for a selector, or a computed name
	// that came out empty (then it looked for nothing).
	Name string
	// Selector is a selector read's, resolved; nil for a name.
	Selector labels.Selector
}

// Reads is what ResolveReads found for one resource.
type Reads struct {
	// Values holds, per handle, what templates see: an object, nil, or a
	// list of objects sorted by name.
	Values map[string]any
	// Refs lists every object read, in reads order then name order.
	Refs []ReadRef
	// Targets lists what each read looked for.
	Targets []ReadTarget
	// Missing names the required reads that found nothing: the resource
	// waits for them.
	Missing []string
}

// Status is status.reads: each object read, as a map.
func (r *Reads) Status() []any {
	out := make([]any, 0, len(r.Refs))
	for _, ref := range r.Refs {
		m := map[string]any{"apiVersion": ref.APIVersion, "kind": ref.Kind, "namespace": ref.Namespace, "name": ref.Name}
		if ref.Generation != 0 {
			m["generation"] = ref.Generation
		} else {
			m["resourceVersion"] = ref.ResourceVersion
		}
		out = append(out, m)
	}
	return out
}

// maxComputedName bounds what a computed name or label value renders:
// far above any name (253), so that a loop in the platform's template
// over a large spec stops early.
const maxComputedName = 4 << 10

// compileReads gathers the computed names and label values of the reads
// of res, the config's entry at index, as the config's validation parsed them (each is parsed
// once per load), keyed by their path under the entry.
func compileReads(cfg *config.Config, index int, res config.Resource) (map[string]*template.Template, error) {
	out := map[string]*template.Template{}
	var errs []error
	add := func(key, text string) {
		if !config.IsTemplate(text) {
			return
		}
		t, ok := cfg.ReadTemplate(index, key)
		if !ok {
			errs = append(errs, fmt.Errorf("%s: not parsed at load (the config was decoded, not validated)", key))
			return
		}
		out[key] = t
	}
	for i, rd := range res.Reads {
		add(fmt.Sprintf("reads[%d].objectName", i), rd.ObjectName)
		if rd.Selector != nil {
			for k, v := range rd.Selector.MatchLabels {
				add(fmt.Sprintf("reads[%d].selector.matchLabels[%s]", i, k), v)
			}
		}
	}
	return out, errors.Join(errs...)
}

// HasReads reports whether the entry declares reads: its render then
// depends on more than the resource.
func (s *Set) HasReads() bool { return len(s.res.Reads) > 0 }

// RenderOffline renders u as the controller would (RenderReading), from
// what the caller gives in place of the cluster (stencil render and
// stencil test): live, its live children, and reads, the objects its
// entry's reads see.
func (s *Set) RenderOffline(u *unstructured.Unstructured, live Live, reads ReadSource) (*Result, *Reads, error) {
	parent, err := view.NewObject(u, s.Resource().GVR())
	if err != nil {
		return nil, nil, err
	}
	return s.RenderReading(parent, reads, live, nil)
}

// ReadError is a failure to resolve an entry's reads (a read kind whose
// watch has not listed, a computed name that fails to run): the
// controller reports it as ReadFailed and retries it, where a failed
// render is the resource's own and waits for a change.
type ReadError struct{ Err error }

// Error implements error.
func (e *ReadError) Error() string { return e.Err.Error() }

// Unwrap returns the failure.
func (e *ReadError) Unwrap() error { return e.Err }

// RenderReading is "resolve the reads, wait or render", one for the
// controller and RenderOffline (stencil render, stencil test), so that
// what the tests show is what runs. The entry's reads are resolved over
// parent from src (nil Reads when it declares none), then parent is
// rendered with what they found and with live, its live children (nil:
// none). When a required read finds nothing, nothing is rendered: a nil
// Result and no error, the Reads naming it in Missing; the caller waits.
// A failure to resolve is a *ReadError. resolved, when not nil, is told
// what the reads found before anything renders: the controller indexes
// it then, so that a change from that moment on, or the creation of what
// a required read waits for, queues the resource again.
func (s *Set) RenderReading(parent *view.Object, src ReadSource, live Live, resolved func(*Reads)) (*Result, *Reads, error) {
	var r *Reads
	if s.HasReads() {
		var err error
		if r, err = s.ResolveReads(parent, src); err != nil {
			return nil, nil, &ReadError{Err: err}
		}
		if resolved != nil {
			resolved(r)
		}
		if len(r.Missing) > 0 {
			return nil, r, nil
		}
		parent.Reads = r.Values
	}
	res, err := s.RenderWith(parent, live)
	return res, r, err
}

// ResolveReads renders the computed names and selectors of the entry's
// reads over parent and takes what they name from src. A computed name or
// label value that renders empty, or is not a valid name or value, reads
// nothing; a fixed read reads in its namespace, every other in the
// resource's.
func (s *Set) ResolveReads(parent *view.Object, src ReadSource) (*Reads, error) {
	out := &Reads{Values: make(map[string]any, len(s.res.Reads))}
	for i, rd := range s.res.Reads {
		ns := parent.Namespace
		if rd.Fixed() && rd.Namespace != "" {
			ns = rd.Namespace
		}
		target := ReadTarget{Read: rd, Namespace: ns}
		if rd.Selector != nil {
			set := labels.Set{}
			valid := true
			for k, v := range rd.Selector.MatchLabels {
				got, err := s.computed(fmt.Sprintf("reads[%d].selector.matchLabels[%s]", i, k), v, parent)
				if err != nil {
					return nil, err
				}
				if len(validation.IsValidLabelValue(got)) > 0 || (got == "" && config.IsTemplate(v)) {
					// A computed value that renders empty (the spec
					// field unset) would match every object without
					// the label: it reads nothing instead.
					valid = false
				}
				set[k] = got
			}
			if !valid {
				// A label value no object can carry matches nothing.
				target.Selector = labels.Nothing()
				out.Targets = append(out.Targets, target)
				out.Values[rd.Name] = []any{}
				continue
			}
			target.Selector = labels.SelectorFromValidatedSet(set)
			out.Targets = append(out.Targets, target)
			items, err := src.List(rd, ns, target.Selector)
			if err != nil {
				return nil, fmt.Errorf("reads[%d] (%s): %w", i, rd.Name, err)
			}
			slices.SortFunc(items, func(a, b *unstructured.Unstructured) int { return strings.Compare(a.GetName(), b.GetName()) })
			list := make([]any, 0, len(items))
			for _, u := range items {
				served := src.Served(u.GroupVersionKind().GroupKind())
				list = append(list, readview.View(u, rd, served))
				out.Refs = append(out.Refs, refOf(u, served))
			}
			out.Values[rd.Name] = list
			continue
		}
		name, err := s.computed(fmt.Sprintf("reads[%d].objectName", i), rd.ObjectName, parent)
		if err != nil {
			return nil, err
		}
		if len(validation.IsDNS1123Subdomain(name)) > 0 {
			name = ""
		}
		target.Name = name
		out.Targets = append(out.Targets, target)
		var u *unstructured.Unstructured
		if name != "" {
			if u, err = src.Get(rd, ns, name); err != nil {
				return nil, fmt.Errorf("reads[%d] (%s): %w", i, rd.Name, err)
			}
		}
		if u == nil {
			out.Values[rd.Name] = nil
			if rd.Required {
				what := rd.Kind + " " + ns + "/" + name
				if name == "" {
					what = rd.Kind + " (" + rd.Name + ": the resource names none)"
				}
				out.Missing = append(out.Missing, what)
			}
			continue
		}
		served := src.Served(u.GroupVersionKind().GroupKind())
		out.Values[rd.Name] = readview.View(u, rd, served)
		out.Refs = append(out.Refs, refOf(u, served))
	}
	return out, nil
}

// computed renders a read's name or label value over parent; text without
// an action is itself. "<no value>" (a spec field the resource does not
// set) renders as nothing.
func (s *Set) computed(key, text string, parent *view.Object) (string, error) {
	t, ok := s.readTemplates[key]
	if !ok {
		return text, nil
	}
	w := &boundedWriter{max: maxComputedName}
	if err := t.Execute(w, parent); err != nil {
		return "", fmt.Errorf("%s: %w", key, err)
	}
	return strings.TrimSpace(strings.ReplaceAll(w.b.String(), "<no value>", "")), nil
}

// boundedWriter fails a write past max bytes.
type boundedWriter struct {
	b   strings.Builder
	max int
}

// Write implements io.Writer.
func (w *boundedWriter) Write(p []byte) (int, error) {
	if w.b.Len()+len(p) > w.max {
		return 0, fmt.Errorf("renders more than %d bytes, longer than any name", w.max)
	}
	return w.b.Write(p)
}

// refOf names u for status.reads: by resourceVersion, or, for a kind
// stencil serves (served), by generation. Such an object's
// resourceVersion changes with every status patch stencil makes, which
// its readers do not see (readview.View): recorded, it would make resources
// that read each other patch each other's status forever.
func refOf(u *unstructured.Unstructured, served bool) ReadRef {
	ref := ReadRef{APIVersion: u.GetAPIVersion(), Kind: u.GetKind(), Namespace: u.GetNamespace(), Name: u.GetName()}
	if served {
		ref.Generation = u.GetGeneration()
	} else {
		ref.ResourceVersion = u.GetResourceVersion()
	}
	return ref
}

// readFunc is read: the value of a declared read, from the render's
// parent.
func (s *Set) readFunc(e *executor) func(handle string) (any, error) {
	return func(handle string) (any, error) {
		if !slices.ContainsFunc(s.res.Reads, func(rd config.Read) bool { return rd.Name == handle }) {
			return nil, fmt.Errorf("read %q: the entry declares no read of that name (reads: %s)", handle, readNames(s.res.Reads))
		}
		if e.reads == nil {
			return nil, nil
		}
		return e.reads[handle], nil
	}
}

// readNames lists the handles of reads, for messages.
func readNames(reads []config.Read) string {
	if len(reads) == 0 {
		return "none"
	}
	names := make([]string, len(reads))
	for i, rd := range reads {
		names[i] = rd.Name
	}
	return strings.Join(names, ", ")
}

// undeclaredReads returns, per template, the handles its read calls name
// (as a string constant) that the entry does not declare.
func undeclaredReads(res config.Resource, root *template.Template) map[string][]string {
	out := map[string][]string{}
	declared := map[string]bool{}
	for _, rd := range res.Reads {
		declared[rd.Name] = true
	}
	for _, t := range root.Templates() {
		if t.Tree == nil {
			continue
		}
		walkCommands(t.Tree.Root, func(c *parse.CommandNode) {
			if len(c.Args) < 2 {
				return
			}
			id, ok := c.Args[0].(*parse.IdentifierNode)
			if !ok || id.Ident != funcRead {
				return
			}
			if s, ok := c.Args[1].(*parse.StringNode); ok && !declared[s.Text] && !slices.Contains(out[t.Tree.ParseName], s.Text) {
				out[t.Tree.ParseName] = append(out[t.Tree.ParseName], s.Text)
			}
		})
	}
	return out
}

// walkCommands calls f for every command of every pipe under n,
// arguments that are pipes included.
func walkCommands(n parse.Node, f func(*parse.CommandNode)) {
	var pipe func(p *parse.PipeNode)
	pipe = func(p *parse.PipeNode) {
		if p == nil {
			return
		}
		for _, c := range p.Cmds {
			f(c)
			for _, a := range c.Args {
				if ch, ok := a.(*parse.ChainNode); ok {
					a = ch.Node // (read "x").data
				}
				if sub, ok := a.(*parse.PipeNode); ok {
					pipe(sub)
				}
			}
		}
	}
	engine.Walker{Action: func(a *parse.ActionNode) { pipe(a.Pipe) }, Branch: pipe}.Walk(n)
}

// ReadObjects flattens a render's reads into the objects they hold, for
// Helm's lookup.
func ReadObjects(values map[string]any) []map[string]any {
	var out []map[string]any
	for _, handle := range slices.Sorted(maps.Keys(values)) {
		v := values[handle]
		switch v := v.(type) {
		case map[string]any:
			out = append(out, v)
		case []any:
			for _, item := range v {
				if m, ok := item.(map[string]any); ok {
					out = append(out, m)
				}
			}
		}
	}
	return out
}

// quoteAll quotes each of s, for messages.
func quoteAll(s []string) []string {
	out := make([]string, len(s))
	for i, v := range s {
		out[i] = fmt.Sprintf("%q", v)
	}
	return out
}

// StaticReads is a ReadSource over a fixed list of objects: the files of
// stencil render --reads and of stencil test's cases.
type StaticReads struct {
	// Objects are the objects that exist; one without a namespace is in
	// DefaultNamespace.
	Objects          []*unstructured.Unstructured
	DefaultNamespace string
	// Kinds are the kinds stencil serves (the config's entries with a
	// kind).
	Kinds map[schema.GroupKind]bool
}

// NewStaticReads returns the StaticReads of objs for the entries of sets.
func NewStaticReads(objs []*unstructured.Unstructured, defaultNS string, sets []*Set) *StaticReads {
	kinds := map[schema.GroupKind]bool{}
	for _, s := range sets {
		if s.res.Kind != "" {
			kinds[schema.GroupKind{Group: s.res.Group, Kind: s.res.Kind}] = true
		}
	}
	return &StaticReads{Objects: objs, DefaultNamespace: defaultNS, Kinds: kinds}
}

// Get implements ReadSource.
func (s *StaticReads) Get(rd config.Read, namespace, name string) (*unstructured.Unstructured, error) {
	for _, u := range s.Objects {
		if u.GroupVersionKind() == rd.GVK() && s.namespace(u) == namespace && u.GetName() == name {
			return u, nil
		}
	}
	return nil, nil
}

// List implements ReadSource.
func (s *StaticReads) List(rd config.Read, namespace string, sel labels.Selector) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	for _, u := range s.Objects {
		if u.GroupVersionKind() == rd.GVK() && s.namespace(u) == namespace && sel.Matches(labels.Set(u.GetLabels())) {
			out = append(out, u)
		}
	}
	return out, nil
}

// Served implements ReadSource.
func (s *StaticReads) Served(gk schema.GroupKind) bool { return s.Kinds[gk] }

func (s *StaticReads) namespace(u *unstructured.Unstructured) string {
	if ns := u.GetNamespace(); ns != "" {
		return ns
	}
	return s.DefaultNamespace
}
