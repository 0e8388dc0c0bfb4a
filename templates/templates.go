// Package templates loads the Go templates named in the stencil config,
// with the hermetic vocabulary chart authors know (sprig, include), and
// renders a custom resource into the unstructured children the controller
// applies.
//
// The design choice a newcomer may question: rendering does more than run
// text/template. The custom resources are written by tenants with fewer
// rights than stencil, so a value an action prints is never YAML syntax: it
// lands as exactly one value where its action stands, whatever characters
// it holds (package engine, the html/template idea applied to YAML). It also
// enforces the child contract (allowed kinds only, the parent's namespace
// only, unique names) and stamps the controller ownerReference and the
// stencil labels itself, overriding whatever the template wrote. The
// templates are user input; the guarantees in docs/configuration.md must
// not depend on every template author remembering them, and a template
// that breaks them fails here with an engine.RenderError instead of at the
// API server. For the same reason every render runs under a budget
// (package budget): a tenant's number must not turn a plausible template
// into unbounded work.
package templates

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"slices"
	"strings"
	"sync"
	"text/template"
	"text/template/parse"

	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"helm.sh/helm/v4/pkg/chart/common"

	"stencil.dev/stencil/config"
	"stencil.dev/stencil/entry"
	"stencil.dev/stencil/templates/budget"
	"stencil.dev/stencil/templates/chart"
	"stencil.dev/stencil/templates/coverage"
	"stencil.dev/stencil/templates/engine"
	"stencil.dev/stencil/templates/funcs"
)

// DefaultKinds are the child kinds a template may render when neither the
// config entry's children list nor Options says otherwise.
var DefaultKinds = config.DefaultChildren

// Options tunes Load.
type Options struct {
	// AllowedKinds are the child kinds templates may render when the config
	// entry lists no children; empty means DefaultKinds.
	AllowedKinds []schema.GroupVersionKind
	// Capabilities are what a chart entry's render sees as
	// .Capabilities (the API server's version and API versions); nil:
	// Helm's defaults, as helm template has them.
	Capabilities *common.Capabilities
	// Coverage, when set, records which branches renders take (own
	// templates and a chart's; "stencil test --coverage" renders in this
	// process then, since a render worker loads its own sets).
	Coverage *coverage.Coverage
	// unbudgeted loads the templates without the render budget's
	// counting, for BenchmarkRender's baseline only.
	unbudgeted bool
}

// Set holds the parsed templates of one configured resource. It is safe for
// concurrent use.
type Set struct {
	res config.Resource
	// entry is the compiled entry res is the Resource of.
	entry *entry.Entry
	// specSchema is the spec's schema of a chart entry's generated CRD,
	// which the spec is pruned with before a render (expose.go).
	specSchema *structuralschema.Structural
	kinds      []schema.GroupVersionKind
	// root holds every template and helper of the entry in one namespace
	// (so that include and template find the helpers' defines), rewritten
	// for structure-safe rendering.
	root *template.Template
	// revision names the templates and helpers that render the children
	// (not the status template), for an entry with a rollout; empty
	// otherwise. The controller records it in the resource's status
	// (contract.StatusTemplateRevision).
	revision string
	// budget bounds each render (package budget).
	budget     budget.Limits
	unbudgeted bool
	// executors are clones of root, each with the functions bound to its
	// own engine.State; a render takes one for its whole run.
	executors sync.Pool
	// order is the order the templates render in: each after those it
	// depends on (config.TemplateOrder); byName finds a template by id.
	order  []int
	byName map[string]config.Template
	// readsLive says a template reads live children or waits for another.
	readsLive bool
	// seesStatus says a template may read the resource's status (seen.go).
	seesStatus bool
	// chart renders a chart entry's children instead of templates
	// (chartmode.go), with capabilities as .Capabilities.
	chart        *chart.Chart
	capabilities *common.Capabilities
	// wall, when set, renders RenderWith in a worker process (wall.go).
	wall Wall
	// readTemplates are the computed names and label values of the
	// entry's reads, by field (reads.go).
	readTemplates map[string]*template.Template
}

// verifyFastPath, set by the package's tests, decodes every document both
// ways and fails on any difference (engine.NewState).
var verifyFastPath = false

// executor is one clone of a Set's templates and what its functions record.
type executor struct {
	t  *template.Template
	st engine.State
	// live is the render's view of the live children (nil: none); checks
	// holds, per Kind/name, the readyWhen checks of the template that
	// rendered that child in this render.
	live   Live
	checks map[string][]config.ReadyCheck
	// views holds what observed returned in this render, per Kind/name.
	views map[string]map[string]any
	// reads are the render's reads, by handle (view.Object.Reads).
	reads map[string]any
	// trace is told each template's name before it runs (RenderHere).
	trace func(template string)
}

func (s *Set) executor() (*executor, error) {
	if e, ok := s.executors.Get().(*executor); ok {
		return e, nil
	}
	t, err := s.root.Clone()
	if err != nil {
		return nil, err
	}
	e := &executor{t: t, st: engine.NewState(s.budget, verifyFastPath), checks: map[string][]config.ReadyCheck{}, views: map[string]map[string]any{}}
	engine.Bind(t, &e.st, !s.unbudgeted, s.liveFuncs(e))
	return e, nil
}

func (s *Set) release(e *executor) {
	e.st.Reset()
	e.live, e.trace, e.reads = nil, nil, nil
	clear(e.checks)
	clear(e.views)
	s.executors.Put(e)
}

// Resource returns the config entry the set was loaded for, as compiled
// (package entry): children read from its chart, overrideValues expanded.
func (s *Set) Resource() config.Resource { return s.res }

// Entry returns the compiled entry the set was loaded from.
func (s *Set) Entry() *entry.Entry { return s.entry }

// Entries returns the compiled entries of sets, in order.
func Entries(sets []*Set) []*entry.Entry {
	out := make([]*entry.Entry, len(sets))
	for i, s := range sets {
		out[i] = s.entry
	}
	return out
}

// Kinds returns the child kinds the set may render.
func (s *Set) Kinds() []schema.GroupVersionKind { return slices.Clone(s.kinds) }

// Load compiles the entry of cfg that serves res's resource (package
// entry) and loads its Set (LoadEntry).
func Load(cfg *config.Config, res config.Resource, opts Options) (*Set, error) {
	for i, r := range cfg.Resources {
		if r.GVR() == res.GVR() {
			e, err := entry.CompileOne(cfg, i)
			if err != nil {
				return nil, err
			}
			return LoadEntry(cfg, e, opts)
		}
	}
	return nil, fmt.Errorf("%s: no entry serves %s", cfg.Path, res)
}

// LoadEntry parses every template (and the status template) of the
// compiled entry e once, or prepares its chart. Template names are the
// paths as written in the config, so errors read "template:
// webapp/deployment.yaml.tmpl:12: ...". All errors are returned, joined,
// each prefixed with the config file and entry.
func LoadEntry(cfg *config.Config, e *entry.Entry, opts Options) (*Set, error) {
	res, entry := e.Resource, e.Label
	// The entry's children list decides; Options only when it has none.
	s := &Set{res: res, entry: e, kinds: res.ChildGVKs(), budget: budget.Limits(config.RenderBudget{}.WithDefaults()), unbudgeted: opts.unbudgeted}
	if res.RenderBudget != nil {
		s.budget = budget.Limits(res.RenderBudget.WithDefaults())
	}
	if len(res.Children) == 0 && len(opts.AllowedKinds) > 0 {
		s.kinds = slices.Clone(opts.AllowedKinds)
	}
	var err error
	if s.readTemplates, err = compileReads(cfg, e.Index, res); err != nil {
		return nil, &config.FieldError{File: cfg.Path, Entry: entry, Field: "reads", Err: err}
	}
	if res.Chart != "" {
		s.capabilities = opts.Capabilities
		if err := s.loadChart(cfg, e); err != nil {
			return nil, err
		}
		if opts.Coverage != nil {
			if err := s.chart.Instrument(opts.Coverage.Instrument); err != nil {
				return nil, &config.FieldError{File: cfg.Path, Entry: entry, Field: "chart", Err: err}
			}
		}
		return s, nil
	}
	var errs []error
	// fieldOf names the config field of each file, for errors found after
	// parsing.
	fieldOf := map[string]string{}
	root := template.New(entry).Option("missingkey=error").Funcs(funcs.Hermetic()).Funcs(engine.ParseFuncs()).Funcs(liveStubs)
	rev := sha256.New()
	parseField := func(field, name string) {
		fieldOf[name] = field
		h := rev
		if field == "statusTemplate" {
			h = nil
		}
		if err := parseFile(cfg, root, name, h); err != nil {
			errs = append(errs, &config.FieldError{File: cfg.Path, Entry: entry, Field: field, Err: err})
		}
	}
	for i, name := range res.Helpers {
		parseField(fmt.Sprintf("helpers[%d]", i), name)
	}
	for i, t := range res.Templates {
		parseField(fmt.Sprintf("templates[%d]", i), t.Path)
	}
	if res.StatusTemplate != "" {
		parseField("statusTemplate", res.StatusTemplate)
	}
	if len(res.Templates) == 0 {
		errs = append(errs, &config.FieldError{File: cfg.Path, Entry: entry, Field: "templates", Err: errors.New("at least one template is required")})
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	for name, handles := range undeclaredReads(res, root) {
		field := fieldOf[name]
		if field == "" {
			field = "templates"
		}
		errs = append(errs, &config.FieldError{File: cfg.Path, Entry: entry, Field: field,
			Err: fmt.Errorf("%s: read %s: the entry declares no such read (reads: %s)", name, strings.Join(quoteAll(handles), ", "), readNames(res.Reads))})
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	// Read before the rewrites below: what the authors wrote decides
	// what a render may read of the status.
	s.seesStatus = seesStatus(root)
	// Rewritten once all are parsed: a later file may redefine a block.
	done := map[*parse.Tree]bool{}
	for _, t := range root.Templates() {
		if t.Tree == nil || done[t.Tree] {
			continue
		}
		done[t.Tree] = true
		if err := engine.Rewrite(t.Tree, !opts.unbudgeted); err != nil {
			field := fieldOf[t.Tree.ParseName]
			if field == "" {
				field = "templates"
			}
			errs = append(errs, &config.FieldError{File: cfg.Path, Entry: entry, Field: field, Err: err})
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if opts.Coverage != nil {
		opts.Coverage.Instrument(root)
	}
	s.root = root
	var cycle []string
	if s.order, cycle = config.TemplateOrder(res.Templates); cycle != nil {
		return nil, &config.FieldError{File: cfg.Path, Entry: entry, Field: "templates", Err: fmt.Errorf("dependsOn forms a cycle: %s", strings.Join(cycle, " -> "))}
	}
	s.byName = map[string]config.Template{}
	for _, t := range res.Templates {
		s.byName[t.Name()] = t
	}
	s.readsLive = readsLive(res, root)
	if res.Rollout != nil {
		s.revision = hex.EncodeToString(rev.Sum(nil)[:5])
	}
	return s, nil
}

// ReadsLive reports whether a template of the set reads live children
// (observed, ready) or waits for another (dependsOn): its render then
// depends on the children too, not only on the custom resource.
func (s *Set) ReadsLive() bool { return s.readsLive }

// liveStubs let templates that call observed and ready parse; each
// executor binds them (liveFuncs).
var liveStubs = template.FuncMap{
	funcObserved: func(string, string) (map[string]any, error) { return nil, errors.New("not bound") },
	funcReady:    func(string, string) (bool, error) { return false, errors.New("not bound") },
	funcRead:     func(string) (any, error) { return nil, errors.New("not bound") },
}

// Revision names the content of the templates and helpers that render the
// children, for an entry with a rollout ("" without one): a changed
// revision is a template change to roll out.
func (s *Set) Revision() string { return s.revision }

// LoadAll compiles cfg (package entry) and loads one Set per entry, in
// config order.
func LoadAll(cfg *config.Config, opts Options) ([]*Set, error) {
	entries, err := entry.Compile(cfg)
	if err != nil {
		return nil, err
	}
	var (
		sets []*Set
		errs []error
	)
	for _, e := range entries {
		s, err := LoadEntry(cfg, e, opts)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		sets = append(sets, s)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return sets, nil
}

// parseFile parses the file name into root's namespace, as a template of
// that name (errors read "template: NAME:LINE: ...").
func parseFile(cfg *config.Config, root *template.Template, name string, rev hash.Hash) error {
	data, err := cfg.ReadFile(cfg.TemplatePath(name))
	if err != nil {
		return fmt.Errorf("reading template: %w", err)
	}
	if rev != nil {
		// Name and content, each ended by a NUL: files renamed or content
		// moved between files changes the revision.
		rev.Write([]byte(name + "\x00"))
		rev.Write(data)
		rev.Write([]byte{0})
	}
	_, err = root.New(name).Parse(string(data))
	return err
}
