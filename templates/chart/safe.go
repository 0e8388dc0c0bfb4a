package chart

import (
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"text/template"
	"time"

	"stencil.dev/stencil/templates/budget"
	"stencil.dev/stencil/templates/engine"
	"stencil.dev/stencil/templates/funcs"
)

// Tenant safety in chart mode. A chart prints values as text, and Helm
// reads the text as YAML: a tenant's image tag of `x\n  evil: true` adds a
// key, and a chart that gives a value to tpl runs it. stencil keeps Helm's
// output byte for byte wherever no tenant text could change the structure,
// and decides by construction, not by searching the output:
//
//   - Every string of the spec, keys included, is tainted (engine.Taint:
//     its bytes live in the render's arena), and every function the chart
//     calls is wrapped once (budget.Wrap) to taint what it makes of
//     tainted text.
//   - A printing action whose text is tainted prints it as Helm does when
//     YAML could read it as nothing but text, and as a placeholder
//     otherwise, which lands as one scalar (package engine's placement).
//   - Helm's serialisers (toYaml, toJson ...) are given the data with each
//     tainted string a placeholder: what they write is the chart's
//     structure, each tenant string one scalar of it, whatever it holds
//     (a quote and a comment in a flow list included).
//   - tpl prints tainted text, it does not run it (unless the entry sets
//     tenantTemplates); a parser's result of tainted text is tainted, so a
//     "\x7b\x7b" that fromYaml decodes is text all the same.
//   - Placeholders carry a secret drawn per render: a tenant string shaped
//     like one is text.
//
// Benign values never meet a placeholder, so a chart renders exactly as
// `helm template` renders it. There is no check after the render (the
// shape check, a second render with plain text compared field by field,
// is gone): with its first line alone, every string leaf of three public
// charts set to each hostile string keeps every object's field paths
// (TestHostileValuesKeepFieldPaths, 6,035 renders with
// STENCIL_HOSTILE_ALL=1), and a benign spec never pays a second render.

// hostile reports whether YAML could read s, printed raw, as syntax or
// not as itself in some position: plain, quoted or flow. Tainted text
// that is hostile prints as a placeholder.
func hostile(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f || r == 0x85 || r == 0x2028 || r == 0x2029 || r == 0xfeff {
			return true
		}
		if strings.ContainsRune("\"'\\#{}[],&*!|>%@`", r) {
			return true
		}
	}
	if strings.Contains(s, ": ") || strings.HasSuffix(s, ":") || strings.TrimSpace(s) != s {
		return true
	}
	switch s[0] {
	case '-', '?', ':':
		return len(s) == 1 || s[1] == ' '
	}
	return false
}

// printer decides, per printed value, whether it lands as Helm prints it
// or as one scalar; one per render.
type printer struct {
	st *engine.State
	// refused is the first function a render called that reads the
	// clock: the error the render reports.
	refused error
	// random lists the calls of random functions and of the clock, each
	// with its location: whether they matter is known once the render is
	// compared with a second one (Chart.Render).
	random []RefusedError
	// clock is what now returns: the time, in the first render; a day,
	// an hour, a minute and a second later in the second.
	clock time.Time
	// templates is the chart's count of templates, which every tpl call
	// clones; tplDepth is the nesting of tpl calls now running.
	templates, tplDepth int64
	// taint holds the tenant's strings (see engine.Taint).
	taint *engine.Taint
	// parsed says the parser now running was given tenant text.
	parsed bool
	// literals are the tenant texts tpl was given, which it prints.
	literals []string
	// tenantTemplates lets tpl run tenant text.
	tenantTemplates bool
	// reads are what lookup answers from (Release.Reads).
	reads []map[string]any
	// helm is Helm's function table, as Helm binds it; helmText is what
	// the serialiser now running would write from the real values, when
	// it is given placeholders (before and after).
	helm     template.FuncMap
	helmText *string
}

// value is valueFunc: what an action prints. Text that holds the
// tenant's (tainted: see engine.Taint) lands as Helm prints it when YAML
// could read it as nothing but text, and as one scalar otherwise,
// whatever the chart did to make it (trunc, printf, a parser's decoded
// escapes). Text the chart printed, serialised data whose tenant strings
// are placeholders, and an include's output print as they are: the
// tenant's text in them is already placed or benign.
func (p *printer) value(loc string, v any) (any, error) {
	if v == nil {
		// Printed, "<no value>", which Helm removes from each file's
		// output but keeps in include and tpl text; given to a layout,
		// what Helm's gets (quote drops it: `x: {{ .Values.unset | quote }}`
		// is null).
		return nil, nil
	}
	s := engine.Printed(v)
	if err := p.st.Meter().Output(int64(len(s))); err != nil {
		return "", err
	}
	if !p.tainted(v) || !hostile(s) {
		return s, nil
	}
	return p.st.Place(s, loc)
}

// tainted reports whether a printed value holds the tenant's text as
// text (not as a placeholder).
func (p *printer) tainted(v any) bool {
	switch v := v.(type) {
	case nil, bool, int, int64, float64:
		return false
	case string:
		return p.taint.Of(v)
	}
	return p.taint.Holds(v)
}

// before is costFunc: what Helm's serialiser or parser name will do with
// v is charged before it runs. A serialiser is given v with each tenant
// string a placeholder, which afterFunc quotes in its output: the
// serialised data is the chart's structure, and each tenant string one
// scalar of it, whatever it holds. A parser is given its text with its
// placeholders resolved; what it returns from tenant text is tainted.
func (p *printer) before(name string, v any) (any, error) {
	if err := p.st.Meter().Before(name, v); err != nil {
		return nil, err
	}
	if funcs.Is(name, funcs.Parser) {
		if s, ok := v.(string); ok {
			s = p.taint.Arg(s)
			p.parsed = p.taint.Of(s)
			return s, nil
		}
		p.parsed = false
		return v, nil
	}
	p.helmText = nil
	if p.tenantTemplates {
		// Tenant text runs where the chart gives it to tpl: it must reach
		// tpl as text.
		return v, nil
	}
	if !p.taint.Holds(v) {
		return v, nil
	}
	// What Helm writes from the real values, for a function given the
	// text (engine.State.RecordHelmText), charged as the call itself.
	if f, ok := p.helm[name].(func(any) string); ok {
		if err := p.st.Meter().Before(name, v); err != nil {
			return nil, err
		}
		text, err := callSerialiser(f, v)
		if err != nil {
			return nil, err
		}
		p.helmText = &text
	}
	return p.st.Placeholders(v, p.taint), nil
}

// callSerialiser calls one of Helm's serialisers, whose must- forms panic
// on what they cannot write: that is an error, as in Helm.
func callSerialiser(f func(any) string, v any) (s string, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%v", r)
		}
	}()
	return f(v), nil
}

// after is afterFunc: what Helm's function name returned.
func (p *printer) after(name string, r any) (any, error) {
	switch {
	case funcs.Is(name, funcs.Parser):
		if p.parsed {
			p.parsed = false
			return p.taint.Value(r), nil
		}
	case funcs.Is(name, funcs.Serialiser):
		s, ok := r.(string)
		if !ok {
			return r, nil
		}
		if funcs.Is(name, funcs.WritesYAML) {
			s = p.st.QuotePlaceholders(s)
		}
		// Helm's toYaml writes nothing where it fails (a key holding NEL,
		// which its YAML cannot write): stencil keeps the data there.
		if helm := p.helmText; helm != nil && (*helm != "" || s == "") {
			p.helmText = nil
			if err := p.st.RecordHelmText(s, *helm); err != nil {
				return nil, err
			}
		}
		return s, nil
	}
	return r, nil
}

// layoutQuote is stencil's copy of quote or squote (f), which lays out
// what valueFunc printed: a placeholder alone is quoted as it stands (it
// lands as one value; a function given the text quotes the value, see
// engine.State.ResolveIndented), and text that holds placeholders (an
// include's) is first given Helm's text, which lands as one value.
func (p *printer) layoutQuote(f func(...any) string) func(...any) (string, error) {
	return func(args ...any) (string, error) {
		for i, a := range args {
			s, ok := a.(string)
			if !ok || !strings.Contains(s, p.st.Mark()) || p.st.IsPlaceholder(s) {
				continue
			}
			tok, err := p.st.Place(p.st.ResolveIndented(s), "")
			if err != nil {
				return "", err
			}
			args[i] = tok
		}
		return f(args...), nil
	}
}

// layoutIndent is stencil's copy of indent or nindent (f), which lays out
// what valueFunc printed: where that is a serialiser's text with
// placeholders, Helm's text laid out the same is recorded with it.
func (p *printer) layoutIndent(f func(int, string) string) func(int, string) (string, error) {
	return func(n int, s string) (string, error) {
		r := f(n, s)
		if strings.Contains(s, p.st.Mark()) {
			if err := p.st.RecordHelmText(r, f(n, p.st.ResolveIndented(s))); err != nil {
				return "", err
			}
		}
		return r, nil
	}
}

// random are the functions (of engine's policy table) whose result
// differs on every render: a child rendered from one would be rewritten
// on every sync, helm-operator's most reported loop. They fail the render
// if what they returned reaches an object stencil applies, and not if it
// reaches only a hook or a test, or nothing (argo-cd calls now for a
// default it then does not use). The date functions that would read the
// clock themselves (funcs.ClockUnlessDated) fail where they are called.
// lookup, one of Helm's own, answers from the entry's declared reads
// only (printer.lookup): stencil never gives the engine a client.
const random = funcs.Random | funcs.Clock

// RefusedError is a render that called a function whose result differs
// on every render.
type RefusedError struct {
	// Loc is "template:line" of the call; empty inside a tpl string.
	Loc string
	// Func is the function.
	Func string
}

// Error implements error.
func (e *RefusedError) Error() string {
	where := e.Loc
	if where == "" {
		where = "a tpl string"
	}
	return fmt.Sprintf("%s: %s is refused in chart mode: its result differs on every render, so every sync would rewrite the child; "+
		"set the value in the resource's spec or the chart's values instead", where, e.Func)
}

// randomError is the error of a render whose objects differ between two
// renders, in template (empty: unknown): the random calls made there,
// or all of them.
func (p *printer) randomError(template string) error {
	var here, all []error
	seen := map[RefusedError]bool{}
	for _, c := range p.random {
		if seen[c] {
			continue
		}
		seen[c] = true
		err := &RefusedError{Loc: c.Loc, Func: c.Func}
		all = append(all, err)
		if template != "" && strings.HasPrefix(c.Loc, template+":") {
			here = append(here, err)
		}
	}
	if len(here) == 0 {
		here = all
	}
	return errors.Join(here...)
}

func (p *printer) refuse(loc, name string) error {
	err := &RefusedError{Loc: loc, Func: name}
	if p.refused == nil {
		p.refused = err
	}
	return err
}

// lookup is Helm's lookup answered from the entry's declared reads: one
// object by apiVersion, kind, namespace and name (an empty mapping when
// no read holds it), or, with an empty name, {items: [...]} of those in
// namespace (every namespace when it is empty), as Helm answers. What it
// returns is tainted, as the spec is: a read object is tenant-influenced.
func (p *printer) lookup(apiVersion, kind, namespace, name string) (map[string]any, error) {
	var items []any
	seen := map[string]bool{}
	for _, o := range p.reads {
		md, _ := o["metadata"].(map[string]any)
		if o["apiVersion"] != apiVersion || o["kind"] != kind || (namespace != "" && md["namespace"] != namespace) {
			continue
		}
		if name == "" {
			key := fmt.Sprint(md["namespace"], "/", md["name"])
			if !seen[key] {
				seen[key] = true
				items = append(items, p.taint.Value(o))
			}
			continue
		}
		if md["name"] == name {
			return p.taint.Value(o).(map[string]any), nil
		}
	}
	if name == "" {
		if items == nil {
			items = []any{}
		}
		slices.SortFunc(items, func(a, b any) int {
			ma, _ := a.(map[string]any)["metadata"].(map[string]any)
			mb, _ := b.(map[string]any)["metadata"].(map[string]any)
			return strings.Compare(fmt.Sprint(ma["namespace"], "/", ma["name"]), fmt.Sprint(mb["namespace"], "/", mb["name"]))
		})
		return map[string]any{"apiVersion": "v1", "kind": "List", "items": items}, nil
	}
	return map[string]any{}, nil
}

// funcs returns the functions a render binds: every name of Helm's
// function table helm, bound as the policy table (funcs) classifies it,
// and the rewrite's own. The first rule that matches a name binds it:
//
//   - a name the table does not classify: refused, naming it
//     (funcs.NotClassified), never bound as it comes, so that a function
//     the next Helm or sprig adds does not run without budget or taint;
//   - one that reads the environment: refused (Helm's table drops them);
//   - one Helm binds per render (include, tpl, required, fail, lookup,
//     getHostByName): perRender's, the executor's copy (none: refused);
//   - random or reading the clock: recorded where it is called (call);
//   - a date function: refused where it would read the clock;
//   - Helm's own serialisers and parsers: Helm's function itself, which
//     the rewrite frames (costFunc and afterFunc around every call);
//   - the rest (pure, sprig's serialisers, local time, and map order,
//     sorted: funcs.Ordered): counted against the render budget and
//     tainted by what they are given.
func (p *printer) funcs(helm, perRender template.FuncMap) template.FuncMap {
	p.helm = helm
	counted := template.FuncMap{}
	bound := template.FuncMap{}
	real := map[string]any{}
	sorted := funcs.Ordered(template.FuncMap{})
	for name, fn := range helm {
		c, known := funcs.ClassOf(name)
		switch {
		case !known:
			bound[name] = funcs.NotClassified(name)
		case c&funcs.Environment != 0:
			bound[name] = refusedCall(name, "it reads the controller's environment")
		case c&funcs.PerRender != 0:
			bound[name] = perRender[name]
			if bound[name] == nil {
				bound[name] = refusedCall(name, "Helm binds it per render, and stencil binds no copy of it")
			}
		case c&random != 0:
			real[name] = fn
		case c&funcs.ClockUnlessDated != 0:
			counted[name] = p.dated(name, fn)
		case c&funcs.HelmOwn != 0 && c&(funcs.Serialiser|funcs.Parser) != 0:
			bound[name] = fn
		case c&funcs.MapOrder != 0:
			counted[name] = sorted[name]
		default:
			counted[name] = fn
		}
	}
	m := engine.Budgeted(counted, p.st, p.taint)
	// A random function is recorded where it is called (call), and
	// tainted, not counted.
	randoms := template.FuncMap{}
	for name := range real {
		randoms[name] = func(args ...any) (any, error) { return p.call("", name, args, real[name]) }
	}
	maps.Copy(m, budget.Wrap(randoms, nil, p.taint))
	// The layouts lay out placeholders, which the taint would resolve:
	// counted, not tainted.
	plain := template.FuncMap{}
	for _, name := range engine.Layouts() {
		if fn, ok := counted[name]; ok {
			plain[name] = fn
		}
	}
	plain = engine.Budgeted(plain, p.st, nil)
	for _, name := range engine.Layouts() {
		m[layoutPrefix+name] = plain[name]
		switch f := plain[name].(type) {
		case func(int, string) string:
			m[layoutPrefix+name] = p.layoutIndent(f)
		case func(...any) string:
			m[layoutPrefix+name] = p.layoutQuote(f)
		}
	}
	maps.Copy(m, bound)
	m[valueFunc] = p.value
	m[costFunc] = p.before
	m[afterFunc] = p.after
	m[literalFunc] = func(i int) string { return p.literals[i] }
	m[tplTextFunc] = p.tplText
	m[tplEndFunc] = func(s string) string {
		p.tplDepth--
		return s
	}
	// Resolved text holds the tenant's: every placeholder in chart mode
	// stands for tenant text.
	m[resolveFunc] = p.taint.Arg
	m[refusedFunc] = func(what string, args ...any) (any, error) {
		loc, name, _ := strings.Cut(what, " ")
		return p.call(loc, name, args, real[name])
	}
	return m
}

// refusedCall is what a function the policy refuses in chart mode is
// bound to: a template that names it parses, as it would in Helm, and a
// call fails saying why.
func refusedCall(name, why string) func(...any) (any, error) {
	return func(...any) (any, error) {
		return nil, fmt.Errorf("%s is refused in chart mode: %s", name, why)
	}
}

// call runs a random function (fn: Helm's), recording where it was
// called; now and ago read the render's clock, which the second render
// sets apart.
func (p *printer) call(loc, name string, args []any, fn any) (any, error) {
	p.random = append(p.random, RefusedError{Loc: loc, Func: name})
	switch name {
	case "now":
		return p.clock, nil
	case "ago":
		if len(args) != 1 {
			return nil, fmt.Errorf("ago takes 1 argument, given %d", len(args))
		}
		t, ok := args[0].(time.Time)
		if !ok {
			return nil, fmt.Errorf("ago: %T is not a time", args[0])
		}
		return p.clock.Sub(t).Round(time.Second).String(), nil
	}
	if fn == nil {
		return nil, fmt.Errorf("%s is not a function of Helm's table", name)
	}
	fv := reflect.ValueOf(fn)
	in := valuesOf(args)
	if t := fv.Type(); t.NumIn() != len(in) && !t.IsVariadic() {
		return nil, fmt.Errorf("%s takes %d arguments, given %d", name, t.NumIn(), len(in))
	}
	for i, a := range in {
		if !a.IsValid() {
			in[i] = reflect.Zero(fv.Type().In(min(i, fv.Type().NumIn()-1)))
		}
	}
	res := fv.Call(in)
	if len(res) == 2 && !res[1].IsNil() {
		return nil, res[1].Interface().(error)
	}
	return res[0].Interface(), nil
}

// dated is date function name (fn: Helm's), refused where it would read
// the clock: called without a date.
func (p *printer) dated(name string, fn any) func(...any) (any, error) {
	return func(args ...any) (any, error) {
		if !clockFree(name, args) {
			return nil, p.refuse("", name+" without a date (it would read the clock)")
		}
		out := reflect.ValueOf(fn).Call(valuesOf(args))
		return out[0].Interface(), nil
	}
}

// tplText is tplTextFunc: the text tpl is about to run, rewritten as the
// chart's templates are at load (its loops and its body counted, its
// printed values through valueFunc), charged what Helm does for it (a
// parse, and a clone of every template of the chart), and refused past
// the nesting bound. Text that is not a string is left to tpl's own
// error, and text that does not parse to Helm's.
func (p *printer) tplText(text any) (any, error) {
	s, ok := text.(string)
	if !ok {
		return text, nil
	}
	if !p.tenantTemplates && p.taint.Of(s) {
		// The tenant's text is text: tpl prints it (as one scalar where
		// YAML would read it as syntax), it does not run it.
		p.literals = append(p.literals, s)
		text, err := rewriteFile("tpl", fmt.Sprintf("{{ %s %d }}", literalFunc, len(p.literals)-1))
		if err != nil {
			return nil, err
		}
		p.tplDepth++
		return text, nil
	}
	meter := p.st.Meter()
	p.tplDepth++
	if limit := meter.Limits().IncludeDepth; p.tplDepth > limit {
		return nil, &budget.Error{Bound: "includeDepth", Limit: limit, What: fmt.Sprintf("tpl nested more than %d deep (a value that runs itself?)", limit)}
	}
	if err := meter.Charge(1 + p.templates + int64(len(s))/16); err != nil {
		return nil, err
	}
	for _, prefix := range internalPrefixes {
		if strings.Contains(s, prefix) {
			return nil, fmt.Errorf("tpl: the text calls %s..., a function of stencil's own that only the chart's templates may call", prefix)
		}
	}
	rewritten, err := rewriteFile("tpl", s)
	if err != nil {
		return s, nil
	}
	return rewritten, nil
}

// clockFree reports whether a date function's arguments name the date:
// date FMT DATE, dateInZone FMT DATE TZ, htmlDate DATE, durationRound D.
func clockFree(name string, args []any) bool {
	i := 1
	switch name {
	case "htmlDate", "htmlDateInZone", "durationRound":
		i = 0
	}
	if i >= len(args) {
		return false
	}
	switch args[i].(type) {
	case time.Time, *time.Time, int, int32, int64, uint, uint32, uint64:
		return name != "durationRound"
	case string, time.Duration:
		return name == "durationRound"
	}
	return false
}

func valuesOf(args []any) []reflect.Value {
	out := make([]reflect.Value, len(args))
	for i, a := range args {
		out[i] = reflect.ValueOf(a)
	}
	return out
}
