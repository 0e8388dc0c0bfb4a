// Package budget bounds every render (docs/templates.md, "A budget for
// every render"): a Meter counts the work of one render against the
// entry's renderBudget, and Wrap makes every template function count.
//
// The choice a newcomer may question: text/template cannot be interrupted
// from outside, so the work is counted where it happens, not timed, and a
// render stops at the first step past its bound:
//
//   - The engine's rewrite makes every range iteration and every
//     template body start with a call of StepFunc, and turns template calls
//     into include, whose nesting is bounded: a loop or a recursion costs
//     a step per turn, whatever its body.
//   - Every function a template may call is wrapped (Wrap): each call
//     costs a step, plus what it returns (an item per list item or map
//     entry, one per 64 bytes of text), and no one call may return more
//     than StringBytes of text or ListItems items.
//   - Functions that could build a large result from a small input (until,
//     repeat, indent, replace, printf's widths, toYaml of a structure that
//     shares its parts...) are checked before they run (guards), since the
//     allocation itself is the harm: a result too large to return is never
//     built.
//
// Everything else an action does is bounded by the template's own size
// for each step counted, so steps bound the time, and the bounds on
// results bound the memory. The counts depend only on the templates and
// the resource, never on the clock: every replica and every pass fails the
// same render the same way.
package budget

import (
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"strings"
	"text/template"
	"unicode/utf8"

	"stencil.dev/stencil/gvr"
)

// StepFunc is the internal function the rewrite calls at the start of
// every range iteration and template body.
const StepFunc = "__stencil_step"

// Meter counts the work of one render against its limits. It is not safe
// for concurrent use: each executor has its own, and a render uses one.
type Meter struct {
	limits gvr.RenderBudget
	steps  int64
	// measured says, per function name, that each argument is measured
	// before a call and how many bytes it may write for one (see Wrap).
	measured map[string]int64
}

// NewMeter returns a Meter of limits.
func NewMeter(limits gvr.RenderBudget) Meter { return Meter{limits: limits} }

// Limits returns the limits the meter counts against.
func (meter *Meter) Limits() gvr.RenderBudget { return meter.limits }

// Steps returns the steps counted so far.
func (meter *Meter) Steps() int64 { return meter.steps }

// Reset readies the meter for the next render.
func (meter *Meter) Reset() { meter.steps = 0 }

// ErrExceeded is what every render past its budget wraps; find it
// with errors.Is.
var ErrExceeded = errors.New("render budget exceeded")

// Error names the bound a render went past.
type Error struct {
	// Bound is the renderBudget field: steps, stringBytes, listItems or
	// includeDepth.
	Bound string
	// Limit is its value.
	Limit int64
	// What says what went past it.
	What string
}

// Error reads "render budget exceeded: until returns 300000000 items, over
// renderBudget.listItems 100000".
func (e *Error) Error() string {
	return fmt.Sprintf("%v: %s, over renderBudget.%s %d", ErrExceeded, e.What, e.Bound, e.Limit)
}

// Is makes errors.Is(err, ErrExceeded) hold.
func (e *Error) Is(target error) bool { return target == ErrExceeded }

// Charge adds n steps and fails once the render is past its budget.
func (meter *Meter) Charge(n int64) error {
	meter.steps += n
	if meter.steps > meter.limits.Steps {
		return &Error{Bound: "steps", Limit: meter.limits.Steps, What: fmt.Sprintf("more than %d steps", meter.limits.Steps)}
	}
	return nil
}

// chargeResult charges what one call of name returned, and fails when it is
// larger than any one call may return.
func (meter *Meter) chargeResult(name string, v any) error {
	switch r := v.(type) {
	case string:
		if int64(len(r)) > meter.limits.StringBytes {
			return &Error{Bound: "stringBytes", Limit: meter.limits.StringBytes, What: fmt.Sprintf("%s returns %d bytes", name, len(r))}
		}
		return meter.Charge(int64(len(r)) / 64)
	case []any:
		return meter.chargeItems(name, len(r))
	case []string:
		return meter.chargeItems(name, len(r))
	case []int:
		return meter.chargeItems(name, len(r))
	case []int64:
		return meter.chargeItems(name, len(r))
	case map[string]any:
		return meter.chargeItems(name, len(r))
	}
	return nil
}

func (meter *Meter) chargeItems(name string, n int) error {
	if err := meter.Items(name, int64(n)); err != nil {
		return err
	}
	return meter.Charge(int64(n))
}

// Items fails when n items are more than one call may return.
func (meter *Meter) Items(name string, n int64) error {
	if n > meter.limits.ListItems {
		return &Error{Bound: "listItems", Limit: meter.limits.ListItems, What: fmt.Sprintf("%s returns %d items", name, n)}
	}
	return nil
}

// Text fails when n bytes are more than one call may return.
func (meter *Meter) Text(name string, n int64) error {
	if n > meter.limits.StringBytes {
		return &Error{Bound: "stringBytes", Limit: meter.limits.StringBytes, What: fmt.Sprintf("%s would return %d bytes", name, n)}
	}
	return nil
}

// Measured fails when v, written out (every shared part as often as it is
// referenced, as a serialiser writes it), is larger than one call may
// return; it charges the walk. A list that holds itself 30 levels deep is
// 2^30 of its items, and toYaml would write every one.
func (meter *Meter) Measured(name string, v any) error {
	limit := meter.limits.StringBytes
	switch t := v.(type) {
	case string:
		// The common case (quote of a printed value) without the walk.
		if int64(len(t)) > limit {
			return &Error{Bound: "stringBytes", Limit: limit, What: fmt.Sprintf("%s would write more than %d bytes", name, limit)}
		}
		return meter.Charge(int64(len(t)) / 64)
	case nil, bool, int, int64, float64:
		return nil
	}
	var size int64
	var walk func(v any, depth int) bool
	walk = func(v any, depth int) bool {
		if depth > 10_000 {
			size = limit + 1
			return false
		}
		switch t := v.(type) {
		case string:
			size += int64(len(t)) + 2
		case []any:
			size += 2
			for _, e := range t {
				if !walk(e, depth+1) {
					return false
				}
			}
		case map[string]any:
			size += 2
			for k, e := range t {
				size += int64(len(k)) + 2
				if !walk(e, depth+1) {
					return false
				}
			}
		case []string:
			for _, e := range t {
				size += int64(len(e)) + 2
			}
		default:
			rv := reflect.ValueOf(v)
			switch rv.Kind() {
			case reflect.Slice, reflect.Array:
				for i := range rv.Len() {
					if !walk(rv.Index(i).Interface(), depth+1) {
						return false
					}
				}
			case reflect.Map:
				it := rv.MapRange()
				for it.Next() {
					size += 8
					if !walk(it.Value().Interface(), depth+1) {
						return false
					}
				}
			default:
				size += 8
			}
		}
		return size <= limit
	}
	walk(v, 0)
	if size > limit {
		return &Error{Bound: "stringBytes", Limit: limit, What: fmt.Sprintf("%s would write more than %d bytes", name, limit)}
	}
	return meter.Charge(size / 64)
}

// guard checks a call before it runs; args are the call's arguments.
type guard func(meter *Meter, name string, args []any) error

// guards are the functions whose result can be far larger than their
// arguments, each checked before it runs.
var guards = map[string]guard{
	"until":     func(meter *Meter, name string, a []any) error { return meter.Items(name, abs(toInt(a, 0))) },
	"untilStep": guardUntilStep,
	"seq":       guardSeq,
	"repeat": func(meter *Meter, name string, a []any) error {
		return meter.Text(name, toInt(a, 0)*int64(len(str(a, 1))))
	},
	"indent":                     guardIndent,
	"nindent":                    guardIndent,
	"wrapWith":                   guardWrapWith,
	"replace":                    guardReplace,
	"split":                      guardSplit(1, 0),
	"splitList":                  guardSplit(1, 0),
	"splitn":                     guardSplit(2, 0),
	"regexSplit":                 guardRegexCount(1, 0),
	"regexFindAll":               guardRegexCount(1, 0),
	"mustRegexSplit":             guardRegexCount(1, 0),
	"mustRegexFindAll":           guardRegexCount(1, 0),
	"regexReplaceAll":            guardRegexReplace,
	"regexReplaceAllLiteral":     guardRegexReplace,
	"mustRegexReplaceAll":        guardRegexReplace,
	"mustRegexReplaceAllLiteral": guardRegexReplace,
	"printf":                     guardPrintf,
	"concat":                     guardConcat,
	"uniq":                       guardQuadratic,
	"mustUniq":                   guardQuadratic,
	"without":                    guardQuadratic,
	"mustWithout":                guardQuadratic,
}

func guardUntilStep(meter *Meter, name string, a []any) error {
	start, stop, step := toInt(a, 0), toInt(a, 1), toInt(a, 2)
	if step == 0 || (stop-start)/step < 0 {
		return nil // sprig returns an empty list
	}
	return meter.Items(name, (stop-start)/step+1)
}

func guardSeq(meter *Meter, name string, a []any) error {
	var first, last, step int64 = 1, 0, 1
	switch len(a) {
	case 1:
		last = toInt(a, 0)
	case 2:
		first, last = toInt(a, 0), toInt(a, 1)
	case 3:
		first, step, last = toInt(a, 0), toInt(a, 1), toInt(a, 2)
	default:
		return nil
	}
	if step == 0 {
		return nil
	}
	return meter.Items(name, abs((last-first)/step)+1)
}

func guardIndent(meter *Meter, name string, a []any) error {
	s := str(a, 1)
	return meter.Text(name, int64(len(s))+abs(toInt(a, 0))*int64(strings.Count(s, "\n")+2))
}

func guardWrapWith(meter *Meter, name string, a []any) error {
	n, sep, s := max(toInt(a, 0), 1), str(a, 1), str(a, 2)
	return meter.Text(name, int64(len(s))+int64(len(s))/n*int64(len(sep))+int64(len(sep)))
}

func guardReplace(meter *Meter, name string, a []any) error {
	old, repl, s := str(a, 0), str(a, 1), str(a, 2)
	if len(repl) <= len(old) {
		return nil
	}
	n := int64(strings.Count(s, old))
	return meter.Text(name, int64(len(s))+n*int64(len(repl)-len(old)))
}

// guardSplit counts the parts of splitting argument s by argument sep.
func guardSplit(s, sep int) guard {
	return func(meter *Meter, name string, a []any) error {
		text, by := str(a, s), str(a, sep)
		n := int64(utf8.RuneCountInString(text)) + 1
		if by != "" {
			n = int64(strings.Count(text, by)) + 1
		}
		return meter.Items(name, n)
	}
}

// guardRegexCount counts the matches of regex argument re in argument s.
func guardRegexCount(s, re int) guard {
	return func(meter *Meter, name string, a []any) error {
		r, err := regexp.Compile(str(a, re))
		if err != nil {
			return nil // the function reports it
		}
		text := str(a, s)
		if err := meter.Charge(int64(len(text)) / 64); err != nil {
			return err
		}
		return meter.Items(name, int64(len(r.FindAllStringIndex(text, int(min(meter.limits.ListItems+1, int64(len(text))+1))))))
	}
}

func guardRegexReplace(meter *Meter, name string, a []any) error {
	r, err := regexp.Compile(str(a, 0))
	if err != nil {
		return nil
	}
	s, repl := str(a, 1), str(a, 2)
	if err := meter.Charge(int64(len(s)) / 64); err != nil {
		return err
	}
	if repl == "" {
		return nil
	}
	limit := int(min(meter.limits.StringBytes, int64(len(s))+1))
	n := int64(len(r.FindAllStringIndex(s, limit)))
	// Each $ in the replacement may stand for a whole match, and the
	// matches together are at most the text.
	return meter.Text(name, int64(len(s))+n*int64(len(repl))+int64(strings.Count(repl, "$"))*int64(len(s)))
}

// guardPrintf refuses a width or precision (%0100000000d, %.*s with a
// large argument) that would pad the result past stringBytes. It scans the
// format by hand: printf is common, and a regexp here cost BenchmarkRender
// its allocations.
func guardPrintf(meter *Meter, name string, a []any) error {
	return checkFormat(meter, name, str(a, 0), a[min(1, len(a)):])
}

// checkFormat is guardPrintf of format and its arguments.
func checkFormat(meter *Meter, name, format string, args []any) error {
	star := false
	for i := 0; i < len(format); i++ {
		if format[i] != '%' {
			continue
		}
		for i++; i < len(format); i++ {
			c := format[i]
			switch {
			case c == '*':
				star = true
			case c >= '0' && c <= '9':
				var n int64
				for ; i < len(format) && format[i] >= '0' && format[i] <= '9'; i++ {
					n = n*10 + int64(format[i]-'0')
					if n > meter.limits.StringBytes {
						return meter.Text(name, n)
					}
				}
				i--
			case c == '+' || c == '-' || c == '#' || c == ' ' || c == '.' || c == '[' || c == ']':
			default:
				goto verb
			}
		}
	verb:
	}
	if star {
		for i := range args {
			if abs(toInt(args, i)) > meter.limits.StringBytes {
				return meter.Text(name, abs(toInt(args, i)))
			}
		}
	}
	return nil
}

func guardConcat(meter *Meter, name string, a []any) error {
	var n int64
	for _, l := range a {
		if rv := reflect.ValueOf(l); rv.Kind() == reflect.Slice || rv.Kind() == reflect.Array {
			n += int64(rv.Len())
		}
	}
	return meter.Items(name, n)
}

// guardQuadratic charges the comparisons of a function that compares every
// item with every other (sprig's uniq and without).
func guardQuadratic(meter *Meter, name string, a []any) error {
	var n, m int64 = 0, 1
	if rv := reflect.ValueOf(first(a)); rv.Kind() == reflect.Slice || rv.Kind() == reflect.Array {
		n = int64(rv.Len())
	}
	if name == "uniq" || name == "mustUniq" {
		m = n
	} else {
		m = int64(len(a) - 1)
	}
	return meter.Charge(n * m / 64)
}

func first(a []any) any {
	if len(a) == 0 {
		return nil
	}
	return a[0]
}

// toInt reads argument i as sprig does with toInt64 (0 when it is not a
// number).
func toInt(a []any, i int) int64 {
	if i >= len(a) {
		return 0
	}
	switch v := a[i].(type) {
	case int:
		return int64(v)
	case int64:
		return v
	case int32:
		return int64(v)
	case float64:
		if v > 1e18 || v < -1e18 {
			return 1e18
		}
		return int64(v)
	case string:
		var n int64
		for _, c := range v {
			if c < '0' || c > '9' {
				break
			}
			n = n*10 + int64(c-'0')
			if n > 1e18 {
				return 1e18
			}
		}
		return n
	}
	rv := reflect.ValueOf(a[i])
	switch rv.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return rv.Int()
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		if rv.Uint() > 1e18 {
			return 1e18
		}
		return int64(rv.Uint())
	}
	return 0
}

func abs(n int64) int64 {
	if n < 0 {
		return -n
	}
	return n
}

// str reads argument i as text.
func str(a []any, i int) string {
	if i >= len(a) {
		return ""
	}
	if s, ok := a[i].(string); ok {
		return s
	}
	return fmt.Sprint(a[i])
}

// Wrap returns funcs with every function wrapped to count its
// steps into meter, check its arguments (guards, and measured: the
// functions that write out or copy their arguments whole, with how many
// bytes they may write for one) and bound its result. The builtins that can write large text (print, printf, println,
// html, js, urlquery) are replaced by counted ones too; and and or keep
// their short-circuit as builtins, and cost what their arguments cost.
func Wrap(funcs template.FuncMap, meter *Meter, measured map[string]int64) template.FuncMap {
	meter.measured = measured
	out := make(template.FuncMap, len(funcs)+8)
	for name, fn := range funcs {
		out[name] = wrapFunc(meter, name, fn)
	}
	for name, fn := range map[string]any{
		"print": fmt.Sprint, "printf": fmt.Sprintf, "println": fmt.Sprintln,
		"html": template.HTMLEscaper, "js": template.JSEscaper, "urlquery": template.URLQueryEscaper,
	} {
		out[name] = wrapFunc(meter, name, fn)
	}
	out[StepFunc] = func(n int) (string, error) { return "", meter.Charge(int64(n)) }
	return out
}

// before runs the checks of a call of name with args.
func (meter *Meter) before(name string, args []any) error {
	return meter.beforeCall(name, meter.measured[name], guards[name], args)
}

// beforeCall is before with name's entries of measured and guards,
// looked up once when the function is wrapped.
func (meter *Meter) beforeCall(name string, measure int64, g guard, args []any) error {
	if err := meter.Charge(1); err != nil {
		return err
	}
	if measure > 0 {
		for _, a := range args {
			if err := meter.Measured(name, a); err != nil {
				return err
			}
		}
		if measure > 1 {
			var n int64
			for _, a := range args {
				if s, ok := a.(string); ok {
					n += int64(len(s))
				}
			}
			if err := meter.Text(name, n*measure); err != nil {
				return err
			}
		}
	}
	if g != nil {
		return g(meter, name, args)
	}
	return nil
}

// mustNot panics with err: the wrapped functions of the common signatures
// return no error, and text/template turns a function's panic into its
// error, with the template and line.
func mustNot(err error) {
	if err != nil {
		panic(err)
	}
}

// wrapFunc wraps fn (see Wrap). The common signatures get a typed
// wrapper; the rest go through reflection.
func wrapFunc(meter *Meter, name string, fn any) any {
	measure, g := meter.measured[name], guards[name]
	checked := measure > 0 || g != nil
	before := func(args []any) error {
		if !checked {
			return meter.Charge(1)
		}
		return meter.beforeCall(name, measure, g, args)
	}
	switch f := fn.(type) {
	case func(string) string:
		return func(s string) string {
			mustNot(meter.Charge(1 + int64(len(s))/64))
			r := f(s)
			mustNot(meter.chargeResult(name, r))
			return r
		}
	case func(any) string:
		return func(v any) string {
			if checked {
				mustNot(before([]any{v}))
			} else {
				mustNot(meter.Charge(1))
			}
			r := f(v)
			mustNot(meter.chargeResult(name, r))
			return r
		}
	case func(any) (string, error):
		return func(v any) (string, error) {
			if checked {
				if err := before([]any{v}); err != nil {
					return "", err
				}
			} else if err := meter.Charge(1); err != nil {
				return "", err
			}
			r, err := f(v)
			if err != nil {
				return r, err
			}
			return r, meter.chargeResult(name, r)
		}
	case func(int, string) string:
		return func(n int, s string) string {
			if checked {
				mustNot(before([]any{n, s}))
			} else {
				mustNot(meter.Charge(1))
			}
			r := f(n, s)
			mustNot(meter.chargeResult(name, r))
			return r
		}
	case func(string, string) string:
		return func(a, b string) string {
			mustNot(meter.Charge(1 + int64(len(a)+len(b))/64))
			r := f(a, b)
			mustNot(meter.chargeResult(name, r))
			return r
		}
	case func(...any) string:
		return func(args ...any) string {
			mustNot(before(args))
			r := f(args...)
			mustNot(meter.chargeResult(name, r))
			return r
		}
	case func(any, ...any) any:
		return func(v any, args ...any) any {
			if checked {
				mustNot(before(append([]any{v}, args...)))
			} else {
				mustNot(meter.Charge(1))
			}
			r := f(v, args...)
			mustNot(meter.chargeResult(name, r))
			return r
		}
	case func(any, string) bool:
		return func(v any, s string) bool {
			mustNot(meter.Charge(1))
			return f(v, s)
		}
	case func(any, string, any) any:
		return func(m any, k string, d any) any {
			mustNot(meter.Charge(1))
			r := f(m, k, d)
			mustNot(meter.chargeResult(name, r))
			return r
		}
	case func(any) int64:
		return func(v any) int64 {
			mustNot(meter.Charge(1))
			return f(v)
		}
	case func(string, any) (any, error):
		return func(s string, v any) (any, error) {
			if err := meter.Charge(1); err != nil {
				return nil, err
			}
			return f(s, v)
		}
	case func(string, ...any) string:
		return func(format string, args ...any) string {
			mustNot(meter.Charge(1))
			for _, v := range args {
				mustNot(meter.Measured(name, v))
			}
			mustNot(checkFormat(meter, name, format, args))
			r := f(format, args...)
			mustNot(meter.chargeResult(name, r))
			return r
		}
	case func(string, string, string) string:
		return func(a, b, c string) string {
			if checked {
				mustNot(before([]any{a, b, c}))
			} else {
				mustNot(meter.Charge(1))
			}
			r := f(a, b, c)
			mustNot(meter.chargeResult(name, r))
			return r
		}
	}
	return wrapReflect(meter, name, fn)
}

var errorType = reflect.TypeFor[error]()

// wrapReflect wraps a function of any signature.
func wrapReflect(meter *Meter, name string, fn any) any {
	fv := reflect.ValueOf(fn)
	ft := fv.Type()
	if ft.Kind() != reflect.Func || ft.NumOut() == 0 {
		return fn
	}
	returnsErr := ft.NumOut() == 2 && ft.Out(1) == errorType
	return reflect.MakeFunc(ft, func(in []reflect.Value) []reflect.Value {
		args := make([]any, 0, len(in))
		for i, v := range in {
			if ft.IsVariadic() && i == len(in)-1 {
				for j := range v.Len() {
					args = append(args, v.Index(j).Interface())
				}
				continue
			}
			args = append(args, v.Interface())
		}
		fail := func(err error) []reflect.Value {
			if !returnsErr {
				panic(err)
			}
			return []reflect.Value{reflect.Zero(ft.Out(0)), reflect.ValueOf(&err).Elem()}
		}
		if err := meter.before(name, args); err != nil {
			return fail(err)
		}
		var out []reflect.Value
		if ft.IsVariadic() {
			out = fv.CallSlice(in)
		} else {
			out = fv.Call(in)
		}
		if returnsErr && !out[1].IsNil() {
			return out
		}
		if err := meter.chargeResult(name, out[0].Interface()); err != nil {
			return fail(err)
		}
		return out
	}).Interface()
}
