package configtest

import (
	"errors"
	"fmt"
	"reflect"
	"strings"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
	"github.com/google/cel-go/interpreter"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"stencil.dev/stencil/configtest/lookedat"
)

// Assertions are CEL, the language of the CRDs' validation rules, over:
//
//	objects   the rendered children, in render order (maps, as YAML shows them)
//	status    the status the controller would patch
//	resource  the test's custom resource
//	waits     the templates that wait, as "T waits for Kind/name, which ..."
//	events    the events the sync records, as "Type Reason: message"
//	pruned    the children the sync deletes, as "Kind/name"
//
// Each must evaluate to true. A failure prints the expression, what it
// came to, where its top is a comparison both sides' values, and what it
// read of which objects (package configtest/lookedat).
//
// Each assertion runs under a cost limit, cel-go's runtime cost (about
// one unit per step: a field read, a comparison, an iteration of a
// comprehension): a comprehension typed wrong (a nested exists over a
// thousand-element list, three deep) is 10^9 steps and would hang CI; it
// fails its case at the limit instead, within about a second. Programs
// are optimized (cel.OptOptimize): a constant list is built once, not on
// every iteration, where the cost model would not count its elements.

// DefaultCostLimit is an assertion's cost limit where neither its case
// nor its file sets costLimit: the API server's own limit for one CEL
// expression (k8s.io/apiserver celconfig.PerCallLimit, "roughly 0.1
// second"), so an assertion may do what a CRD's validation rule may. A
// realistic assertion costs far less: an exists over a render of 1,000
// objects comparing two fields of each costs about 10,000.
const DefaultCostLimit = 1_000_000

// assertion is one compiled assertion of a case.
type assertion struct {
	Assertion
	prog cel.Program
	// limit is its cost limit.
	limit uint64
	// sides are the operands of a top-level comparison, to print what
	// the assertion saw; nil otherwise.
	sides []side
	op    string
}

// side is one operand of a comparison: its text and its program.
type side struct {
	text string
	prog cel.Program
}

// comparisons are the operators whose operands a failure prints.
var comparisons = map[string]string{"_==_": "==", "_!=_": "!=", "_<_": "<", "_<=_": "<=", "_>_": ">", "_>=_": ">=", "@in": "in"}

// celEnv is the environment every assertion compiles in.
func celEnv() (*cel.Env, error) {
	return cel.NewEnv(
		// Kept so that a failure can print the sides of a comparison
		// that holds a macro (filter, exists) as written.
		cel.EnableMacroCallTracking(),
		cel.Variable("objects", cel.ListType(cel.DynType)),
		cel.Variable("status", cel.DynType),
		cel.Variable("resource", cel.DynType),
		cel.Variable("waits", cel.ListType(cel.StringType)),
		cel.Variable("events", cel.ListType(cel.StringType)),
		cel.Variable("pruned", cel.ListType(cel.StringType)),
	)
}

// compileAssertions compiles every assertion of the files once; one that
// does not compile, or is not a bool, names its file, case and index.
func compileAssertions(files []*File) (map[*Case][]*assertion, error) {
	env, err := celEnv()
	if err != nil {
		return nil, err
	}
	out := map[*Case][]*assertion{}
	for _, f := range files {
		for _, c := range f.Cases {
			limit := uint64(DefaultCostLimit)
			switch {
			case c.CostLimit != nil:
				limit = uint64(*c.CostLimit)
			case f.CostLimit > 0:
				limit = uint64(f.CostLimit)
			}
			for i, a := range c.Assert {
				field := fmt.Sprintf("cases[%d] (%s).assert[%d]", c.index, c.Name, i)
				compiled, err := compileAssertion(env, a, limit)
				if err != nil {
					return nil, &FileError{File: c.file, Field: field, Err: err}
				}
				out[c] = append(out[c], compiled)
			}
		}
	}
	return out, nil
}

// compileAssertion compiles a, and the sides of its comparison, each to
// run under limit.
func compileAssertion(env *cel.Env, a Assertion, limit uint64) (*assertion, error) {
	checked, iss := env.Compile(a.Expr)
	if iss.Err() != nil {
		return nil, fmt.Errorf("%q: %w", a.Expr, iss.Err())
	}
	if t := checked.OutputType(); t != cel.BoolType && t != cel.DynType {
		return nil, fmt.Errorf("%q is a %s, want a bool", a.Expr, t)
	}
	prog, err := env.Program(checked, cel.CostLimit(limit), cel.EvalOptions(cel.OptOptimize))
	if err != nil {
		return nil, fmt.Errorf("%q: %w", a.Expr, err)
	}
	out := &assertion{Assertion: a, prog: prog, limit: limit}
	root := checked.NativeRep().Expr()
	if root.Kind() == ast.CallKind {
		call := root.AsCall()
		if op, ok := comparisons[call.FunctionName()]; ok && len(call.Args()) == 2 {
			out.op = op
			for _, arg := range call.Args() {
				text, err := cel.ExprToString(arg, checked.NativeRep().SourceInfo())
				if err != nil {
					out.sides = nil
					break
				}
				sideAST, iss := env.Compile(text)
				if iss.Err() != nil {
					out.sides = nil
					break
				}
				p, err := env.Program(sideAST, cel.CostLimit(limit), cel.EvalOptions(cel.OptOptimize))
				if err != nil {
					out.sides = nil
					break
				}
				out.sides = append(out.sides, side{text: text, prog: p})
			}
		}
	}
	return out, nil
}

// check evaluates a over the render; it returns why it failed, or "".
func (a *assertion) check(r *rendered, resource *unstructured.Unstructured) string {
	vars := activation(r, resource)
	val, _, err := a.prog.Eval(vars)
	head := "assert " + a.Expr
	if len(a.Expr) > maxExprShown {
		// A generated expression can be kilobytes; its start names it.
		head = "assert " + strings.ToValidUTF8(a.Expr[:maxExprShown], "") + "..."
	}
	if a.Message != "" {
		head = a.Message + " (" + head + ")"
	}
	if overLimit(err) {
		// Its sides and what it read would cost as much again, and say
		// nothing the limit does not.
		return fmt.Sprintf("%s: stopped at its cost limit of %d (the case's or file's costLimit raises it; docs/testing-configs.md)", head, a.limit)
	}
	if err != nil {
		return head + ": " + err.Error() + hint(err) + a.looked(r, resource)
	}
	if b, ok := val.Value().(bool); ok && b {
		return ""
	}
	var saw []string
	for _, s := range a.sides {
		v, _, err := s.prog.Eval(vars)
		if err != nil {
			saw = append(saw, fmt.Sprintf("%s: %v", s.text, err))
			continue
		}
		saw = append(saw, fmt.Sprintf("%s = %s", s.text, celShow(v)))
	}
	msg := head + ": got " + celShow(val)
	if len(saw) > 0 {
		msg += "\n    " + strings.Join(saw, "\n    ")
	}
	return msg + a.looked(r, resource)
}

// looked runs a again over values that record what it reads, and says
// what it read of which objects ("" when nothing).
func (a *assertion) looked(r *rendered, resource *unstructured.Unstructured) string {
	labels := make([]string, len(r.children))
	for i, c := range r.children {
		labels[i] = objectLabel(c)
	}
	vars, rec := lookedat.Activation(activation(r, resource), labels, "resource "+objectLabel(resource))
	// Its result is the one already reported; only the reads count.
	_, _, _ = a.prog.Eval(vars)
	if s := rec.String(); s != "" {
		return "\n    " + strings.ReplaceAll(s, "\n", "\n    ")
	}
	return ""
}

// maxExprShown is how much of an assertion a failure prints.
const maxExprShown = 200

// overLimit says whether err is an evaluation stopped at its cost limit.
func overLimit(err error) bool {
	var cancelled interpreter.EvalCancelledError
	return errors.As(err, &cancelled) && cancelled.Cause == interpreter.CostLimitExceeded
}

// hint adds what a missing field usually means.
func hint(err error) string {
	if strings.Contains(err.Error(), "no such key") {
		return " (has(x.f) tests whether a field is there)"
	}
	return ""
}

// activation is the variables an assertion sees.
func activation(r *rendered, resource *unstructured.Unstructured) map[string]any {
	objects := make([]any, len(r.children))
	for i, c := range r.children {
		objects[i] = c.Object
	}
	return map[string]any{
		"objects":  objects,
		"status":   runtime.DeepCopyJSONValue(r.status),
		"resource": resource.Object,
		"waits":    orNone(r.waits),
		"events":   orNone(r.events),
		"pruned":   orNone(r.pruned),
	}
}

// orNone is l, or an empty list for nil: CEL's size() of nil is an error.
func orNone(l []string) []string {
	if l == nil {
		return []string{}
	}
	return l
}

// celShow prints a CEL value as YAML would, short.
func celShow(v ref.Val) string {
	var target reflect.Type
	switch v.(type) {
	case traits.Mapper:
		target = reflect.TypeFor[map[string]any]()
	case traits.Lister:
		target = reflect.TypeFor[[]any]()
	default:
		return show(v.Value())
	}
	native, err := v.ConvertToNative(target)
	if err != nil {
		return fmt.Sprint(v.Value())
	}
	return show(native)
}
