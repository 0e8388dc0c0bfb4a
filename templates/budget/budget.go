// Package budget bounds every render (docs/templates.md, "A budget for
// every render"): a Meter counts the work of one render against the
// entry's renderBudget, and Wrap makes every template function count.
//
// The choice a newcomer may question: text/template cannot be interrupted
// from outside, so the work is counted where it happens, not timed, and a
// render stops at the first step past its bound:
//
//   - The engine's rewrite makes every range iteration and every
//     template body start with a call of StepFunc (StepRun, StepTurn:
//     steps.go), and turns template calls into include, whose
//     nesting is bounded: a loop or a recursion costs a step per turn,
//     whatever its body.
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
	"math"
	"reflect"
	"regexp"
	"regexp/syntax"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"stencil.dev/stencil/templates/funcs"
)

// StepFunc is the internal function the rewrite calls at the start of
// every range iteration and template body: {{ __stencil_step N }} counts N
// steps.
const StepFunc = "__stencil_step"

// StepTextFunc is StepFunc for chart mode, which also counts the bytes of
// literal text the body prints, {{ __stencil_step_text N B }}: Helm's
// writer is not stencil's to bound.
const StepTextFunc = "__stencil_step_text"

// Limits are the bounds of one render: config.RenderBudget's fields, with
// its defaults applied (templates converts one to the other). The meter
// owns its type so that it imports nothing of stencil's.
type Limits struct {
	Steps, StringBytes, ListItems, IncludeDepth, TimeoutSeconds, MemoryMiB, ResultNodes int64
}

// Meter counts the work of one render against its limits. It is not safe
// for concurrent use: each executor has its own, and a render uses one.
type Meter struct {
	limits Limits
	steps  int64
	// output counts the bytes a render printed, where its writer is not
	// stencil's (chart mode: Helm's engine writes into its own buffers).
	output int64
	// deadline is when the render must end (set at its first step), and
	// ticks counts the charges between two looks at the clock.
	deadline   time.Time
	ticks      uint32
	sinceClock int64
}

// NewMeter returns a Meter of limits.
func NewMeter(limits Limits) Meter { return Meter{limits: limits} }

// Limits returns the limits the meter counts against.
func (meter *Meter) Limits() Limits { return meter.limits }

// Steps returns the steps counted so far.
func (meter *Meter) Steps() int64 { return meter.steps }

// Reset readies the meter for the next render.
func (meter *Meter) Reset() {
	meter.steps, meter.output, meter.deadline, meter.ticks, meter.sinceClock = 0, 0, time.Time{}, 0, 0
}

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
	if e.Bound == "timeoutSeconds" {
		return fmt.Sprintf("%v: %s, over renderBudget.%s %d (the clock is the backstop: raise steps or timeoutSeconds if the template is right)", ErrExceeded, e.What, e.Bound, e.Limit)
	}
	return fmt.Sprintf("%v: %s, over renderBudget.%s %d", ErrExceeded, e.What, e.Bound, e.Limit)
}

// Is makes errors.Is(err, ErrExceeded) hold.
func (e *Error) Is(target error) bool { return target == ErrExceeded }

// clockEvery is how many charges pass between two looks at the clock: a
// charge is at most a few microseconds of work, so a render overruns its
// deadline by well under a millisecond, and reading the clock costs
// nothing measurable.
const clockEvery = 64

// clockSteps is how many steps pass between two looks at the clock at
// most: a call charged many steps (a large toYaml) is long work, and the
// clock is read at the next charge, not 64 charges later.
const clockSteps = 4096

// Charge adds n steps and fails once the render is past its budget, or
// past its deadline (the backstop for work no count models). n is
// saturated: no count, however large, wraps into a small one.
func (meter *Meter) Charge(n int64) error {
	meter.steps = satAdd(meter.steps, max(n, 0))
	if meter.steps > meter.limits.Steps {
		return &Error{Bound: "steps", Limit: meter.limits.Steps, What: fmt.Sprintf("more than %d steps", meter.limits.Steps)}
	}
	meter.ticks++
	meter.sinceClock += max(n, 0)
	if meter.ticks%clockEvery == 1 || meter.sinceClock >= clockSteps {
		meter.sinceClock = 0
		return meter.checkClock()
	}
	return nil
}

// checkClock starts the render's deadline at its first charge, and fails
// once it has passed.
func (meter *Meter) checkClock() error {
	if meter.limits.TimeoutSeconds <= 0 {
		return nil
	}
	now := time.Now()
	if meter.deadline.IsZero() {
		meter.deadline = now.Add(time.Duration(meter.limits.TimeoutSeconds) * time.Second)
		return nil
	}
	if now.After(meter.deadline) {
		return &Error{Bound: "timeoutSeconds", Limit: meter.limits.TimeoutSeconds, What: fmt.Sprintf("the render ran past %ds", meter.limits.TimeoutSeconds)}
	}
	return nil
}

// Output counts n bytes printed where stencil does not own the writer
// (chart mode), and fails once the render printed more than stringBytes,
// the bound stencil's own writer keeps for its templates. Text printed
// into an include that is then printed counts twice: the bound is on the
// work of printing, an upper bound of the output.
func (meter *Meter) Output(n int64) error {
	meter.output = satAdd(meter.output, max(n, 0))
	if meter.output > meter.limits.StringBytes {
		return &Error{Bound: "stringBytes", Limit: meter.limits.StringBytes, What: fmt.Sprintf("the render printed more than %d bytes", meter.limits.StringBytes)}
	}
	return meter.Charge(n / 64)
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
	var size, nodes int64
	// An indenting serialiser writes each entry's depth again as
	// indentation: a value nested 5,000 deep around 100,000 strings is
	// 330 KB of JSON and a gigabyte of YAML.
	price := funcs.PriceOf(name)
	indent := int64(0)
	if price.Indents {
		indent = 2
	}
	var walk func(v any, depth int) bool
	walk = func(v any, depth int) bool {
		nodes++
		size = satAdd(size, satMul(indent, int64(depth)))
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
	// A serialiser's work is per node as much as per byte; YAML's (through
	// JSON, then a node tree) several times JSON's.
	return meter.Charge(satMul(size/64+nodes, max(price.Weight, 1)))
}

// guard checks a call before it runs; args are the call's arguments.
type guard func(meter *Meter, name string, args []any) error

// guards are the functions whose result can be far larger than their
// arguments, each checked before it runs.
var guards = map[string]guard{
	"until":     guardUntil,
	"untilStep": guardUntilStep,
	"seq":       guardSeq,
	"repeat": func(meter *Meter, name string, a []any) error {
		return meter.Text(name, satMul(satAbs(toInt(a, 0)), int64(len(str(a, 1)))))
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
	"join":                       guardJoin,
	"regexMatch":                 guardRegexWork(0, 1),
	"mustRegexMatch":             guardRegexWork(0, 1),
	"regexFind":                  guardRegexWork(0, 1),
	"mustRegexFind":              guardRegexWork(0, 1),
	"randAlphaNum":               guardLength(1),
	"randAlpha":                  guardLength(1),
	"randAscii":                  guardLength(1),
	"randNumeric":                guardLength(1),
	"randBytes":                  guardLength(2),
	"uniq":                       guardQuadratic,
	"mustUniq":                   guardQuadratic,
	"without":                    guardQuadratic,
	"mustWithout":                guardQuadratic,
}

// guardUntil is until N: sprig counts from 0 to N, down when N is
// negative, so until of math.MinInt64 is 2^63 items, not a negative count.
func guardUntil(meter *Meter, name string, a []any) error {
	n := toInt(a, 0)
	step := int64(1)
	if n < 0 {
		step = -1
	}
	return meter.span(name, 0, n, step)
}

func guardUntilStep(meter *Meter, name string, a []any) error {
	return meter.span(name, toInt(a, 0), toInt(a, 1), toInt(a, 2))
}

// guardSeq is seq's arguments turned into the untilStep sprig calls,
// with the same wrapping arithmetic sprig does (seq of math.MaxInt64 asks
// for 1 up to math.MinInt64, which is nothing).
func guardSeq(meter *Meter, name string, a []any) error {
	var start, end, step int64
	switch len(a) {
	case 1:
		start, end, step = 1, toInt(a, 0), 1
		if end < start {
			step = -1
		}
	case 2:
		start, end, step = toInt(a, 0), toInt(a, 1), 1
		if end < start {
			step = -1
		}
	case 3:
		start, step, end = toInt(a, 0), toInt(a, 1), toInt(a, 2)
		if end < start {
			if step > 0 {
				return nil
			}
			return meter.span(name, start, end-1, step)
		}
		return meter.span(name, start, end+1, step)
	default:
		return nil
	}
	return meter.span(name, start, end+step, step)
}

// span checks sprig's untilStep(start, stop, step) before it runs: the
// items it returns, counted without overflow, and whether its counter
// would wrap past the int64 limits, in which case sprig would loop until
// the process runs out of memory: refused.
func (meter *Meter) span(name string, start, stop, step int64) error {
	n, wraps := stepCount(start, stop, step)
	if wraps {
		return &Error{Bound: "listItems", Limit: meter.limits.ListItems,
			What: fmt.Sprintf("%s from %d to %d by %d never ends (its counter would pass the int64 limit)", name, start, stop, step)}
	}
	return meter.Items(name, n)
}

// stepCount is how many items untilStep(start, stop, step) appends, as a
// saturated int64, and whether its counter would wrap around instead of
// reaching stop. The arithmetic is in uint64 offsets from math.MinInt64,
// where no difference of two int64s overflows.
func stepCount(start, stop, step int64) (n int64, wraps bool) {
	off := func(x int64) uint64 { return uint64(x) ^ (1 << 63) }
	var dist, size uint64
	switch {
	case stop > start && step > 0:
		dist, size = off(stop)-off(start), uint64(step)
	case stop < start && step < 0:
		dist, size = off(start)-off(stop), uint64(-(step+1))+1
	default:
		return 0, false
	}
	count := dist / size
	if dist%size != 0 {
		count++
	}
	// The last item is start + (count-1)*step; the counter then moves
	// once more, and must not wrap.
	last := (count - 1) * size
	if step > 0 {
		wraps = off(start)+last > math.MaxUint64-size
	} else {
		wraps = off(start)-last < size
	}
	if count > math.MaxInt64 {
		return math.MaxInt64, wraps
	}
	return int64(count), wraps
}

func guardIndent(meter *Meter, name string, a []any) error {
	s := str(a, 1)
	return meter.Text(name, satAdd(int64(len(s)), satMul(satAbs(toInt(a, 0)), int64(strings.Count(s, "\n")+2))))
}

func guardWrapWith(meter *Meter, name string, a []any) error {
	n, sep, s := max(toInt(a, 0), 1), str(a, 1), str(a, 2)
	return meter.Text(name, satAdd(int64(len(s)), satMul(int64(len(s))/n+1, int64(len(sep)))))
}

func guardReplace(meter *Meter, name string, a []any) error {
	old, repl, s := str(a, 0), str(a, 1), str(a, 2)
	if len(repl) <= len(old) {
		return nil
	}
	n := int64(strings.Count(s, old))
	return meter.Text(name, satAdd(int64(len(s)), satMul(n, int64(len(repl)-len(old)))))
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
	return meter.Text(name, satAdd(satAdd(int64(len(s)), satMul(n, int64(len(repl)))), satMul(int64(strings.Count(repl, "$")), int64(len(s)))))
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
			if n := satAbs(toInt(args, i)); n > meter.limits.StringBytes {
				return meter.Text(name, n)
			}
		}
	}
	return nil
}

// guardJoin is join SEP LIST: the separator once between every two items,
// and the items' text.
func guardJoin(meter *Meter, name string, a []any) error {
	if len(a) < 2 {
		return nil
	}
	sep := int64(len(str(a, 0)))
	rv := reflect.ValueOf(a[1])
	if rv.Kind() != reflect.Slice && rv.Kind() != reflect.Array {
		return nil
	}
	n := int64(rv.Len())
	size := satMul(sep, max(n-1, 0))
	for i := range rv.Len() {
		switch e := rv.Index(i).Interface().(type) {
		case string:
			size = satAdd(size, int64(len(e)))
		default:
			size = satAdd(size, 24) // a number or a value fmt prints
		}
		if size > meter.limits.StringBytes {
			break
		}
	}
	return meter.Text(name, size)
}

// guardRegexWork charges a regular expression's match by its program's
// size times the text's: Go's engine is linear in the text, but for each
// byte it runs every instruction the pattern compiles to, and a short
// pattern ((?:a|b){1000}c) compiles to thousands.
func guardRegexWork(re, s int) guard {
	return func(meter *Meter, name string, a []any) error {
		parsed, err := syntax.Parse(str(a, re), syntax.Perl)
		if err != nil {
			return nil // the function reports it
		}
		prog, err := syntax.Compile(parsed.Simplify())
		if err != nil {
			return nil
		}
		return meter.Charge(satMul(int64(len(prog.Inst)), int64(len(str(a, s)))) / 64)
	}
}

// guardLength is a function whose argument is the length of its result
// (randAlphaNum N), per mul bytes of the result per unit.
func guardLength(mul int64) guard {
	return func(meter *Meter, name string, a []any) error {
		return meter.Text(name, satMul(satAbs(toInt(a, 0)), mul))
	}
}

func guardConcat(meter *Meter, name string, a []any) error {
	var n int64
	for _, l := range a {
		if rv := reflect.ValueOf(l); rv.Kind() == reflect.Slice || rv.Kind() == reflect.Array {
			n = satAdd(n, int64(rv.Len()))
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
	return meter.Charge(satMul(n, m) / 64)
}

func first(a []any) any {
	if len(a) == 0 {
		return nil
	}
	return a[0]
}

// toInt reads argument i as sprig's toInt64 does (0 when it is not a
// number), saturated at the int64 limits: the guards compare sizes, and a
// size must never wrap into a small one.
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
		return floatToInt(v)
	case float32:
		return floatToInt(float64(v))
	case string:
		s := strings.TrimSpace(v)
		if n, err := strconv.ParseInt(s, 0, 64); err == nil {
			return n
		} else if errors.Is(err, strconv.ErrRange) {
			if strings.HasPrefix(s, "-") {
				return math.MinInt64
			}
			return math.MaxInt64
		}
		if f, err := strconv.ParseFloat(s, 64); err == nil {
			return floatToInt(f)
		}
		return 0
	}
	rv := reflect.ValueOf(a[i])
	switch rv.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return rv.Int()
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		if rv.Uint() > math.MaxInt64 {
			return math.MaxInt64
		}
		return int64(rv.Uint())
	case reflect.Float32, reflect.Float64:
		return floatToInt(rv.Float())
	}
	return 0
}

// floatToInt truncates f, saturating at the int64 limits (NaN is 0).
func floatToInt(f float64) int64 {
	switch {
	case f != f:
		return 0
	case f >= math.MaxInt64:
		return math.MaxInt64
	case f <= math.MinInt64:
		return math.MinInt64
	}
	return int64(f)
}

// satAbs is |n|, with |math.MinInt64| saturated to math.MaxInt64 (Go's
// -n leaves it negative).
func satAbs(n int64) int64 {
	switch {
	case n == math.MinInt64:
		return math.MaxInt64
	case n < 0:
		return -n
	}
	return n
}

// satAdd adds two sizes (negative ones count as 0), saturating at
// math.MaxInt64.
func satAdd(a, b int64) int64 {
	a, b = max(a, 0), max(b, 0)
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// satMul multiplies two sizes (negative ones count as 0), saturating at
// math.MaxInt64.
func satMul(a, b int64) int64 {
	a, b = max(a, 0), max(b, 0)
	if a != 0 && b > math.MaxInt64/a {
		return math.MaxInt64
	}
	return a * b
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

// ArgCost is what an argument costs a call, whatever the function does
// with it: a step per list item or map entry and per div bytes of text
// (64, or the function's funcs.Price.PerByte). A function that scans its
// input (has, contains, join, b64enc, sha256sum) pays for the scan, so a
// call inside a loop costs what it does, not one step.
func ArgCost(v any, div int64) int64 {
	switch t := v.(type) {
	case nil, bool, int, int64, float64:
		return 0
	case string:
		return int64(len(t)) / div
	case []any:
		return int64(len(t))
	case map[string]any:
		return int64(len(t))
	case []string:
		return int64(len(t))
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Slice, reflect.Array, reflect.Map, reflect.Chan:
		return int64(rv.Len())
	case reflect.String:
		return int64(rv.Len()) / div
	}
	return 0
}

// Before runs the checks of a call of name with args where the function
// itself is not stencil's to wrap (Helm's own, in chart mode): its cost,
// and the measures and guards of its name.
func (meter *Meter) Before(name string, args ...any) error { return meter.before(name, args) }

// before runs the checks of a call of name with args.
func (meter *Meter) before(name string, args []any) error {
	return meter.beforeCall(name, funcs.PriceOf(name), guards[name], args)
}

// beforeCall is before with name's price and guard, looked up once when
// the function is wrapped.
func (meter *Meter) beforeCall(name string, price funcs.Price, g guard, args []any) error {
	cost := 1 + price.Fixed
	div := price.PerByte
	if div == 0 {
		div = 64
	}
	measure := price.Writes
	for _, a := range args {
		cost = satAdd(cost, ArgCost(a, div))
	}
	if err := meter.Charge(cost); err != nil {
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
			if err := meter.Text(name, satMul(n, measure)); err != nil {
				return err
			}
		}
	}
	if g != nil {
		return g(meter, name, args)
	}
	return nil
}
