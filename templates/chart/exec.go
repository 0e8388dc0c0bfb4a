package chart

import (
	"encoding/base64"
	"errors"
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"
	"sync"
	"text/template"
	_ "unsafe" // go:linkname: Helm's function table (helmFuncMap)

	"github.com/gobwas/glob"
	ci "helm.sh/helm/v4/pkg/chart"
	"helm.sh/helm/v4/pkg/chart/common"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	_ "helm.sh/helm/v4/pkg/engine" // what the go:linkname names below pull from

	"stencil.dev/stencil/templates/budget"
	"stencil.dev/stencil/templates/engine"
)

// This file is Helm's pkg/engine render with its parse kept: Helm parses
// every template of the chart again on every render (Engine.render), which
// was the largest part of chart mode's cost. An executor holds the chart's
// rewritten templates parsed once, with Helm's functions and stencil's
// bound to one printer that each render resets; renders take executors
// from a pool, one render at a time each. What a template sees is Helm's:
// the scoped values, .Template, .Files, include, tpl, required and fail,
// the parse order and the error messages.
//
// Helm does not export its function table or its error formatting; they
// are pulled by go:linkname (Helm's version is pinned in go.mod; a rename
// fails the link, and TestHelmFunctionsArePulled names them; a changed
// signature would link and misbehave, so TestLinkedSignaturesMatch reads
// each from Helm's source and compares it with the declaration here), so
// that chart templates run Helm's toYaml, fromYaml and the rest, not a
// copy. Each name of the table is bound as the policy table classifies it
// (printer.funcs); one it does not know is refused, not bound raw.

//go:linkname helmFuncMap helm.sh/helm/v4/pkg/engine.funcMap
func helmFuncMap() template.FuncMap

//go:linkname helmParseError helm.sh/helm/v4/pkg/engine.cleanupParseError
func helmParseError(filename string, err error) error

//go:linkname helmExecError helm.sh/helm/v4/pkg/engine.reformatExecErrorMsg
func helmExecError(filename string, err error) error

// Helm's bounds and markers (pkg/engine): include's nesting, and what
// wraps the message of required and fail.
const (
	includeMax     = 1000
	warnStartDelim = "HELM_ERR_START"
	warnEndDelim   = "HELM_ERR_END"
)

// helmToYAML is Helm's toYaml, which .Files.AsConfig prints with.
var helmToYAML = helmFuncMap()["toYaml"].(func(any) string)

// renderable is what one template of the chart is rendered with.
type renderable struct {
	vals     common.Values
	basePath string
}

// templateFiles returns every template of ch and its enabled subcharts
// that Helm renders or parses, by path: what an executor parses. The
// contents are the chart's own bytes, not copies (this runs on every
// render; only a new executor reads them).
func templateFiles(ch *chartv2.Chart) map[string][]byte {
	out := map[string][]byte{}
	var walk func(*chartv2.Chart)
	walk = func(c *chartv2.Chart) {
		for _, d := range c.Dependencies() {
			walk(d)
		}
		library := strings.EqualFold(c.Metadata.Type, "library")
		for _, t := range c.Templates {
			if t != nil && helmTemplate(library, t.Name) {
				out[path.Join(c.ChartFullPath(), t.Name)] = t.Data
			}
		}
	}
	walk(ch)
	return out
}

// helmTemplate is Helm's rule for which files of a chart's templates/ are
// templates: all of them, but of a library chart only its partials.
func helmTemplate(library bool, name string) bool {
	return !library || strings.HasPrefix(path.Base(name), "_")
}

// allTemplates lists the templates of ch and its enabled subcharts, each
// with its values scoped as Helm scopes them (a subchart sees its own
// section), keyed by path.
func allTemplates(ch ci.Charter, vals common.Values) map[string]renderable {
	out := map[string]renderable{}
	scopeTemplates(ch, out, vals)
	return out
}

func scopeTemplates(ch ci.Charter, out map[string]renderable, values common.Values) map[string]any {
	vals := values.AsMap()
	subcharts := map[string]any{}
	acc, err := ci.NewAccessor(ch)
	if err != nil {
		// Only a chart of an unknown API version: Load takes v2 alone.
		panic(err)
	}
	md := acc.MetadataAsMap()
	md["IsRoot"] = acc.IsRoot()
	next := map[string]any{
		"Chart":        md,
		"Files":        newFiles(acc.Files()),
		"Release":      vals["Release"],
		"Capabilities": vals["Capabilities"],
		"Values":       make(common.Values),
		"Subcharts":    subcharts,
	}
	if acc.IsRoot() {
		next["Values"] = vals["Values"]
	} else if vs, err := values.Table("Values." + acc.Name()); err == nil {
		next["Values"] = vs
	}
	for _, child := range acc.Dependencies() {
		sub, _ := ci.NewAccessor(child)
		subcharts[sub.Name()] = scopeTemplates(child, out, next)
	}
	parent := acc.ChartFullPath()
	for _, t := range acc.Templates() {
		if t == nil || !helmTemplate(acc.IsLibraryChart(), t.Name) {
			continue
		}
		out[path.Join(parent, t.Name)] = renderable{vals: next, basePath: path.Join(parent, "templates")}
	}
	return next
}

// parseOrder is the order Helm parses templates in: deeper paths first,
// and within a depth by name, descending. A later define of the same
// name wins, so the order is part of what a chart renders.
func parseOrder(files map[string][]byte) []string {
	keys := slices.Collect(maps.Keys(files))
	slices.SortFunc(keys, func(a, b string) int {
		if da, db := strings.Count(a, "/"), strings.Count(b, "/"); da != db {
			return db - da
		}
		return strings.Compare(b, a)
	})
	return keys
}

// executor is the chart's templates parsed once, their functions bound to
// one printer and one state: one render at a time.
type executor struct {
	t     *template.Template
	p     printer
	st    engine.State
	taint *engine.Taint
	// included counts include's nesting per name, as Helm's does.
	included map[string]int
	limits   budget.Limits
	// broken says a render panicked half-way: not pooled again.
	broken bool
	// pool is where it goes back (nil: nowhere).
	pool *sync.Pool
}

// executors pools the executors of each set of templates (the chart's
// enabled subcharts decide which are parsed): at most maxTemplateSets
// sets, past which renders parse as Helm does, every time.
type executors struct {
	mu   sync.Mutex
	sets map[string]*sync.Pool
}

const maxTemplateSets = 16

func (x *executors) pool(key string) *sync.Pool {
	x.mu.Lock()
	defer x.mu.Unlock()
	if p, ok := x.sets[key]; ok {
		return p
	}
	if len(x.sets) >= maxTemplateSets {
		return nil
	}
	if x.sets == nil {
		x.sets = map[string]*sync.Pool{}
	}
	p := &sync.Pool{}
	x.sets[key] = p
	return p
}

// executor returns an executor of the templates keys name, reset for a
// render under limits.
func (c *Chart) executor(files map[string][]byte, keys []string, limits budget.Limits) (*executor, error) {
	pool := c.executors.pool(strings.Join(keys, "\x00"))
	if pool != nil {
		if e, ok := pool.Get().(*executor); ok && e.limits == limits {
			e.reset()
			return e, nil
		}
	}
	e := &executor{st: engine.NewState(limits, false), included: map[string]int{}, limits: limits, pool: pool}
	e.st.LayOut()
	e.taint = engine.NewTaint(&e.st)
	e.p = printer{st: &e.st, templates: int64(c.templates), taint: e.taint}
	e.t = template.New("gotpl").Option("missingkey=zero")
	e.t.Funcs(e.p.funcs(helmFuncMap(), e.perRender()))
	c.parses.Add(1)
	for _, name := range keys {
		if _, err := e.t.New(name).Parse(string(files[name])); err != nil {
			return nil, helmParseError(name, err)
		}
	}
	if c.instrument != nil {
		c.instrument(e.t)
	}
	return e, nil
}

// Instrument has f called on the templates of every executor once they
// are parsed, before a render runs them ("stencil test --coverage" adds
// its branch calls so), and at once on every template of the chart and
// its subcharts, so that a subchart no render enables is counted too.
// Call it before the chart's first render.
func (c *Chart) Instrument(f func(*template.Template)) error {
	c.instrument = f
	files := templateFiles(c.ch)
	// An executor of its own, never pooled: its parse is f's alone.
	_, err := c.executor(files, parseOrder(files), budget.Limits{})
	return err
}

// perRender are stencil's copies of the functions Helm binds per render
// (Engine.initFunMap; funcs.PerRender): include and tpl over the
// executor's templates, required and fail with Helm's markers, lookup
// from the declared reads, getHostByName without DNS (Helm without
// --enable-dns).
func (e *executor) perRender() template.FuncMap {
	return template.FuncMap{
		"include":       e.include(e.t),
		"tpl":           e.tpl(e.t),
		"required":      required,
		"fail":          fail,
		"lookup":        e.p.lookup,
		"getHostByName": func(string) string { return "" },
	}
}

// release gives e back to the pool of its templates.
func (c *Chart) release(e *executor) {
	if e == nil || e.broken || e.pool == nil {
		return
	}
	e.pool.Put(e)
}

// reset readies e for the next render: a new placeholder secret and
// budget, a new taint arena (the strings of the last render's objects
// still point into the old one), and nothing of the last render's calls.
func (e *executor) reset() {
	e.st.Reset()
	e.taint.Reset()
	clear(e.included)
	st, taint, templates, helm := e.p.st, e.p.taint, e.p.templates, e.p.helm
	e.p = printer{st: st, taint: taint, templates: templates, helm: helm}
}

// run renders every template that is not a partial, as Helm's
// Engine.render does: .Template set for each, "<no value>" removed.
func (e *executor) run(tpls map[string]renderable, keys []string) (rendered map[string]string, err error) {
	defer func() {
		if r := recover(); r != nil {
			e.broken = true
			err = fmt.Errorf("rendering template failed: %v", r)
		}
	}()
	rendered = make(map[string]string, len(keys))
	for _, name := range keys {
		if strings.HasPrefix(path.Base(name), "_") {
			continue
		}
		r := tpls[name]
		r.vals["Template"] = common.Values{"Name": name, "BasePath": r.basePath}
		var buf strings.Builder
		if err := e.t.ExecuteTemplate(&buf, name, r.vals); err != nil {
			return map[string]string{}, helmExecError(name, err)
		}
		rendered[name] = strings.ReplaceAll(buf.String(), "<no value>", "")
	}
	return rendered, nil
}

// include is Helm's include over t: a named template's output, its
// nesting bounded per name.
func (e *executor) include(t *template.Template) func(string, any) (string, error) {
	return func(name string, data any) (string, error) {
		if e.included[name] > includeMax {
			return "", fmt.Errorf("rendering template has a nested reference name: %s: %w", name, errors.New("unable to execute template"))
		}
		e.included[name]++
		var buf strings.Builder
		err := t.ExecuteTemplate(&buf, name, data)
		e.included[name]--
		return buf.String(), err
	}
}

// tpl is Helm's tpl over parent: the text parsed into a clone of the
// templates (so that it sees their defines, and its own are its own) and
// run with vals. The rewrite (rewrite.go) hands it text already checked
// and rewritten by printer.tplText.
func (e *executor) tpl(parent *template.Template) func(string, any) (string, error) {
	return func(text string, vals any) (string, error) {
		t, err := parent.Clone()
		if err != nil {
			return "", fmt.Errorf("cannot clone template: %w", err)
		}
		t.Option("missingkey=zero")
		t.Funcs(template.FuncMap{"include": e.include(t), "tpl": e.tpl(t)})
		t, err = t.New(parent.Name()).Parse(text)
		if err != nil {
			return "", fmt.Errorf("cannot parse template %q: %w", text, err)
		}
		var buf strings.Builder
		if err := t.Execute(&buf, vals); err != nil {
			return "", fmt.Errorf("error during tpl function execution for %q: %w", text, err)
		}
		return strings.ReplaceAll(buf.String(), "<no value>", ""), nil
	}
}

// required and fail are Helm's: their message is wrapped so that Helm's
// error formatting prints it alone.
func required(warn string, val any) (any, error) {
	if s, ok := val.(string); val == nil || (ok && s == "") {
		return val, errors.New(warnStartDelim + warn + warnEndDelim)
	}
	return val, nil
}

func fail(msg string) (string, error) {
	return "", errors.New(warnStartDelim + msg + warnEndDelim)
}

// files is .Files, as Helm's engine gives it: the chart's files that are
// not templates, by path.
type files map[string][]byte

func newFiles(from []*common.File) files {
	out := make(files, len(from))
	for _, f := range from {
		out[f.Name] = f.Data
	}
	return out
}

// GetBytes returns the file's content; empty when there is none.
func (f files) GetBytes(name string) []byte {
	if v, ok := f[name]; ok {
		return v
	}
	return []byte{}
}

// Get returns the file's content as a string.
func (f files) Get(name string) string { return string(f.GetBytes(name)) }

// Glob returns the files whose path matches pattern ('/' separates; a
// pattern that does not compile matches everything, as Helm's does).
func (f files) Glob(pattern string) files {
	g, err := glob.Compile(pattern, '/')
	if err != nil {
		g, _ = glob.Compile("**")
	}
	out := files{}
	for name, data := range f {
		if g.Match(name) {
			out[name] = data
		}
	}
	return out
}

// AsConfig returns the files as a ConfigMap's data: base name to content,
// in YAML.
func (f files) AsConfig() string {
	if f == nil {
		return ""
	}
	m := make(map[string]string, len(f))
	for k, v := range f {
		m[path.Base(k)] = string(v)
	}
	return helmToYAML(m)
}

// AsSecrets returns the files as a Secret's data: base name to base64 of
// the content, in YAML.
func (f files) AsSecrets() string {
	if f == nil {
		return ""
	}
	m := make(map[string]string, len(f))
	for k, v := range f {
		m[path.Base(k)] = base64.StdEncoding.EncodeToString(v)
	}
	return helmToYAML(m)
}

// Lines returns the file's lines, without a final empty one.
func (f files) Lines(name string) []string {
	if f == nil || len(f[name]) == 0 {
		return []string{}
	}
	return strings.Split(strings.TrimSuffix(string(f[name]), "\n"), "\n")
}
