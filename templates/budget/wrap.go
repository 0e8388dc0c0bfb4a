package budget

import (
	"fmt"
	"reflect"
	"strings"
	"text/template"
	"unsafe"

	"stencil.dev/stencil/templates/funcs"
)

// Every function a template calls is wrapped once, here, for all that a
// call must do besides its work: count it against the budget (Meter) and,
// in chart mode, carry the taint of the tenant's text (engine.Taint). One
// wrapper per function, with one typed form per common signature, so that
// the two cannot disagree on what a call was given or returned, and a
// call pays for one closure, not one per concern.

// Taint is what a wrapped call does for the tenant's text, which
// engine.Taint implements (chart mode); nil leaves text as it is (own
// templates place every printed value instead).
type Taint interface {
	// Arg is a string argument as the function must see it.
	Arg(s string) string
	// Of reports whether s is the tenant's text.
	Of(s string) bool
	// Holds reports whether v holds the tenant's text.
	Holds(v any) bool
	// String returns s as the tenant's text.
	String(s string) string
	// Value returns a copy of v whose strings are all the tenant's.
	Value(v any) any
}

// Wrap returns fm with every function wrapped to count its steps into
// meter, check its arguments (its price in the policy table,
// funcs.PriceOf, and its guard) and bound its result, and, where taint is
// not nil, to compute on the real text (placeholders in its string
// parameters resolved; a value of any type is passed as it is, so that
// one it selects or prints keeps its placeholders) and taint a string it
// builds from an argument that held tenant text (a structure it builds
// from a tainted string argument, a parser's map, a split's list, has
// its strings tainted; one it returns from structures it was given keeps
// their strings as they are). The rewrite's own functions (named "__...")
// are counted, not tainted.
//
// With a meter, the builtins that can write large text (print, printf,
// println, html, js, urlquery) are replaced by counted ones too, and the
// rewrite's step functions are bound; and and or keep their short-circuit
// as builtins, and cost what their arguments cost. A nil meter counts
// nothing (chart mode's random functions, whose calls are recorded
// instead).
func Wrap(fm template.FuncMap, meter *Meter, taint Taint) template.FuncMap {
	out := make(template.FuncMap, len(fm)+8)
	for name, fn := range fm {
		out[name] = wrapFunc(meter, taint, name, fn)
	}
	if meter == nil {
		return out
	}
	for name, fn := range map[string]any{
		"print": fmt.Sprint, "printf": fmt.Sprintf, "println": fmt.Sprintln,
		"html": template.HTMLEscaper, "js": template.JSEscaper, "urlquery": template.URLQueryEscaper,
	} {
		out[name] = wrapFunc(meter, taint, name, fn)
	}
	out[StepFunc] = func(n int) (string, error) { return "", meter.Charge(int64(n)) }
	out[StepTextFunc] = func(n, text int) (string, error) {
		if err := meter.Output(int64(text)); err != nil {
			return "", err
		}
		return "", meter.Charge(int64(n))
	}
	return out
}

// wrapper is what one wrapped function does around each call.
type wrapper struct {
	// meter counts the call (nil: nothing is counted).
	meter *Meter
	// taint carries the tenant's text through the call (nil: none).
	taint Taint
	name  string
	// price and guard are name's, looked up once; checked says a call
	// needs them (its arguments boxed for beforeCall), where the others
	// are charged what their arguments cost without boxing them.
	price   funcs.Price
	guard   guard
	checked bool
}

// mustNot panics with err: the wrapped functions of the common signatures
// return no error, and text/template turns a function's panic into its
// error, with the template and line.
func mustNot(err error) {
	if err != nil {
		panic(err)
	}
}

// arg is a string argument as the function must see it.
func (w *wrapper) arg(s string) string {
	if w.taint == nil {
		return s
	}
	return w.taint.Arg(s)
}

// charge counts n steps.
func (w *wrapper) charge(n int64) error {
	if w.meter == nil {
		return nil
	}
	return w.meter.Charge(n)
}

// check runs the checks of a call with args (beforeCall).
func (w *wrapper) check(args ...any) error {
	if w.meter == nil {
		return nil
	}
	return w.meter.beforeCall(w.name, w.price, w.guard, args)
}

// result charges what the call returned, and bounds it.
func (w *wrapper) result(r any) error {
	if w.meter == nil {
		return nil
	}
	return w.meter.chargeResult(w.name, r)
}

// of reports whether s, a resolved string argument, is the tenant's.
func (w *wrapper) of(s string) bool { return w.taint != nil && w.taint.Of(s) }

// text taints r, built by the call, when tainted() says an argument held
// tenant text (asked only when r is new text).
func (w *wrapper) text(r string, tainted func() bool) string {
	if w.taint == nil || len(r) == 0 || w.taint.Of(r) || !tainted() {
		return r
	}
	return w.taint.String(r)
}

// holdsAny reports whether one of args holds the tenant's text.
func (w *wrapper) holdsAny(args []any) bool {
	for _, a := range args {
		if w.taint.Holds(a) {
			return true
		}
	}
	return false
}

// value is the taint of r, a value of any type the call returned: a
// string it was given keeps its own taint, one it built is tainted when
// an argument held tenant text (strArg: a string argument did), and a
// structure built from a tainted string argument has its strings
// tainted.
func (w *wrapper) value(r any, strArg bool, others ...any) any {
	if w.taint == nil || r == nil {
		return r
	}
	if s, ok := r.(string); ok {
		if given(s, others) {
			return r
		}
		return w.text(s, func() bool { return strArg || w.holdsAny(others) })
	}
	if strArg {
		return w.taint.Value(r)
	}
	return r
}

// given reports whether r is one of args itself (the same bytes, not an
// equal copy): a function that selects (default, ternary, first, index)
// returns a value it was given, whose taint is its own.
func given(r string, args []any) bool {
	for _, a := range args {
		if s, ok := a.(string); ok && len(s) == len(r) && unsafe.StringData(s) == unsafe.StringData(r) {
			return true
		}
	}
	return false
}

// wrapFunc wraps fn (see Wrap). The common signatures get a typed
// wrapper; the rest go through reflection.
func wrapFunc(meter *Meter, taint Taint, name string, fn any) any {
	w := &wrapper{meter: meter, taint: taint, name: name, price: funcs.PriceOf(name), guard: guards[name]}
	w.checked = meter != nil && (w.price != (funcs.Price{}) || w.guard != nil)
	if strings.HasPrefix(name, "__") {
		w.taint = nil
	}
	switch f := fn.(type) {
	case func(string) string:
		return func(s string) string {
			s = w.arg(s)
			if w.checked {
				mustNot(w.check(s))
			} else {
				mustNot(w.charge(1 + int64(len(s))/64))
			}
			r := f(s)
			mustNot(w.result(r))
			return w.text(r, func() bool { return w.of(s) })
		}
	case func(any) string:
		return func(v any) string {
			if w.checked {
				mustNot(w.check(v))
			} else {
				mustNot(w.charge(1 + ArgCost(v, 64)))
			}
			r := f(v)
			mustNot(w.result(r))
			return w.text(r, func() bool { return w.taint.Holds(v) })
		}
	case func(any) (string, error):
		return func(v any) (string, error) {
			var err error
			if w.checked {
				err = w.check(v)
			} else {
				err = w.charge(1 + ArgCost(v, 64))
			}
			if err != nil {
				return "", err
			}
			r, err := f(v)
			if err == nil {
				err = w.result(r)
			}
			return w.text(r, func() bool { return w.taint.Holds(v) }), err
		}
	case func(int, string) string:
		return func(n int, s string) string {
			s = w.arg(s)
			if w.checked {
				mustNot(w.check(n, s))
			} else {
				mustNot(w.charge(1 + int64(len(s))/64))
			}
			r := f(n, s)
			mustNot(w.result(r))
			return w.text(r, func() bool { return w.of(s) })
		}
	case func(string, string) string:
		return func(a, b string) string {
			a, b = w.arg(a), w.arg(b)
			if w.checked {
				mustNot(w.check(a, b))
			} else {
				mustNot(w.charge(1 + int64(len(a)+len(b))/64))
			}
			r := f(a, b)
			mustNot(w.result(r))
			return w.text(r, func() bool { return w.of(a) || w.of(b) })
		}
	case func(string, string, string) string:
		return func(a, b, c string) string {
			a, b, c = w.arg(a), w.arg(b), w.arg(c)
			if w.checked {
				mustNot(w.check(a, b, c))
			} else {
				mustNot(w.charge(1 + int64(len(a)+len(b)+len(c))/64))
			}
			r := f(a, b, c)
			mustNot(w.result(r))
			return w.text(r, func() bool { return w.of(a) || w.of(b) || w.of(c) })
		}
	case func(...any) string:
		return func(args ...any) string {
			mustNot(w.check(args...))
			r := f(args...)
			mustNot(w.result(r))
			return w.text(r, func() bool { return w.holdsAny(args) })
		}
	case func(string, ...any) string:
		// printf: its arguments measured, its widths checked.
		return func(format string, args ...any) string {
			format = w.arg(format)
			if w.meter != nil {
				cost := 1 + int64(len(format))/64
				if w.checked {
					cost += w.price.Fixed
					for _, v := range args {
						cost = satAdd(cost, ArgCost(v, 64))
					}
				}
				mustNot(w.meter.Charge(cost))
				for _, v := range args {
					mustNot(w.meter.Measured(w.name, v))
				}
				mustNot(checkFormat(w.meter, w.name, format, args))
			}
			r := f(format, args...)
			mustNot(w.result(r))
			return w.text(r, func() bool { return w.of(format) || w.holdsAny(args) })
		}
	case func(any, ...any) any:
		return func(v any, args ...any) any {
			if w.checked {
				mustNot(w.check(append([]any{v}, args...)...))
			} else {
				cost := 1 + ArgCost(v, 64)
				for _, a := range args {
					cost = satAdd(cost, ArgCost(a, 64))
				}
				mustNot(w.charge(cost))
			}
			r := f(v, args...)
			mustNot(w.result(r))
			if s, ok := r.(string); ok && w.taint != nil && !given(s, append(args, v)) {
				return w.text(s, func() bool { return w.taint.Holds(v) || w.holdsAny(args) })
			}
			return r
		}
	case func(any, string) bool:
		return func(v any, s string) bool {
			s = w.arg(s)
			if w.checked {
				mustNot(w.check(v, s))
			} else {
				mustNot(w.charge(1 + ArgCost(v, 64) + int64(len(s))/64))
			}
			return f(v, s)
		}
	case func(any, string, any) any:
		return func(m any, k string, d any) any {
			k = w.arg(k)
			if w.checked {
				mustNot(w.check(m, k, d))
			} else {
				mustNot(w.charge(1 + int64(len(k))/64))
			}
			r := f(m, k, d)
			mustNot(w.result(r))
			return w.value(r, w.of(k), m, d)
		}
	case func(any) int64:
		return func(v any) int64 {
			if w.checked {
				mustNot(w.check(v))
			} else {
				mustNot(w.charge(1))
			}
			return f(v)
		}
	case func(string, any) (any, error):
		return func(s string, v any) (any, error) {
			s = w.arg(s)
			var err error
			if w.checked {
				err = w.check(s, v)
			} else {
				err = w.charge(1 + int64(len(s))/64)
			}
			if err != nil {
				return nil, err
			}
			r, err := f(s, v)
			if err == nil && w.checked {
				if err = w.result(r); err != nil {
					r = nil
				}
			}
			return w.value(r, w.of(s), v), err
		}
	}
	return w.reflect(fn)
}

var errorType = reflect.TypeFor[error]()

// reflect wraps a function of any signature: what the typed forms do,
// on reflect.Values.
func (w *wrapper) reflect(fn any) any {
	fv := reflect.ValueOf(fn)
	ft := fv.Type()
	if ft.Kind() != reflect.Func || ft.NumOut() == 0 {
		return fn
	}
	returnsErr := ft.NumOut() == 2 && ft.Out(1) == errorType
	return reflect.MakeFunc(ft, func(in []reflect.Value) []reflect.Value {
		// strArg: a string parameter got tenant text, so what the call
		// builds from it (a parser's map, a split) is the tenant's.
		strArg := false
		var others []any
		if w.taint != nil {
			strArg, others = w.reflectArgs(ft, in)
		}
		out, err := w.reflectCall(fv, ft, in)
		if err != nil {
			out = fail(ft, returnsErr, err)
		}
		if w.taint != nil {
			w.reflectResult(out, strArg, others)
		}
		return out
	}).Interface()
}

// fail is what a call of a function of type ft returns when its check
// fails: the error where it returns one, else a panic, which
// text/template turns into the call's error. (err is a parameter so that
// only a failing call puts it on the heap.)
func fail(ft reflect.Type, returnsErr bool, err error) []reflect.Value {
	if !returnsErr {
		panic(err)
	}
	return []reflect.Value{reflect.Zero(ft.Out(0)), reflect.ValueOf(&err).Elem()}
}

// reflectArgs resolves the string arguments in (Arg), and returns
// whether one was the tenant's and the arguments of other types that may
// hold the tenant's text.
func (w *wrapper) reflectArgs(ft reflect.Type, in []reflect.Value) (strArg bool, others []any) {
	for i, v := range in {
		if ft.IsVariadic() && i == len(in)-1 {
			for j := range v.Len() {
				e := v.Index(j)
				switch {
				case e.Kind() == reflect.String:
					s := w.taint.Arg(e.String())
					e.Set(reflect.ValueOf(s).Convert(e.Type()))
					strArg = strArg || w.taint.Of(s)
				case e.Kind() == reflect.Interface && !e.IsNil():
					others = append(others, e.Interface())
				}
			}
			continue
		}
		switch {
		case v.Kind() == reflect.String:
			s := w.taint.Arg(v.String())
			in[i] = reflect.ValueOf(s).Convert(v.Type())
			strArg = strArg || w.taint.Of(s)
		case v.Kind() == reflect.Interface && !v.IsNil(), v.Kind() == reflect.Map, v.Kind() == reflect.Slice:
			others = append(others, v.Interface())
		}
	}
	return strArg, others
}

// reflectCall checks and charges the call of fv with in, and makes it; a
// failed check or result is err, the function's own error is in out.
func (w *wrapper) reflectCall(fv reflect.Value, ft reflect.Type, in []reflect.Value) (out []reflect.Value, err error) {
	if w.meter != nil {
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
		if err := w.meter.beforeCall(w.name, w.price, w.guard, args); err != nil {
			return nil, err
		}
	}
	if ft.IsVariadic() {
		out = fv.CallSlice(in)
	} else {
		out = fv.Call(in)
	}
	if w.meter == nil || len(out) == 2 && ft.Out(1) == errorType && !out[1].IsNil() {
		return out, nil
	}
	return out, w.meter.chargeResult(w.name, out[0].Interface())
}

// reflectResult taints out[0], what the call returned, as value does.
func (w *wrapper) reflectResult(out []reflect.Value, strArg bool, others []any) {
	tainted := func() bool { return strArg || w.holdsAny(others) }
	r := out[0]
	switch {
	case r.Kind() == reflect.String:
		out[0] = reflect.ValueOf(w.text(r.String(), tainted)).Convert(r.Type())
	case r.Kind() == reflect.Interface && !r.IsNil():
		var v any
		if s, ok := r.Interface().(string); ok {
			if given(s, others) {
				return
			}
			v = w.text(s, tainted)
		} else if strArg {
			v = w.taint.Value(r.Interface())
		} else {
			return
		}
		out[0] = reflect.ValueOf(&v).Elem()
	case strArg && r.CanInterface() && (r.Kind() == reflect.Map || r.Kind() == reflect.Slice):
		if v := w.taint.Value(r.Interface()); reflect.TypeOf(v) == r.Type() {
			out[0] = reflect.ValueOf(v)
		}
	}
}
