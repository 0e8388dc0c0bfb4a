package configtest

import (
	"fmt"
	"reflect"
	"strings"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// Assertions are CEL, the language of the CRDs' validation rules, over:
//
//	objects   the rendered children, in render order (maps, as YAML shows them)
//	status    the status the controller would patch
//	resource  the test's custom resource
//	waits     the templates that wait, as "T waits for Kind/name, which ..."
//
// Each must evaluate to true. A failure prints the expression, what it
// came to, and, where its top is a comparison, both sides' values.

// assertion is one compiled assertion of a case.
type assertion struct {
	Assertion
	prog cel.Program
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
			for i, a := range c.Assert {
				field := fmt.Sprintf("cases[%d] (%s).assert[%d]", c.index, c.Name, i)
				compiled, err := compileAssertion(env, a)
				if err != nil {
					return nil, &FileError{File: c.file, Field: field, Err: err}
				}
				out[c] = append(out[c], compiled)
			}
		}
	}
	return out, nil
}

// compileAssertion compiles a, and the sides of its comparison.
func compileAssertion(env *cel.Env, a Assertion) (*assertion, error) {
	checked, iss := env.Compile(a.Expr)
	if iss.Err() != nil {
		return nil, fmt.Errorf("%q: %w", a.Expr, iss.Err())
	}
	if t := checked.OutputType(); t != cel.BoolType && t != cel.DynType {
		return nil, fmt.Errorf("%q is a %s, want a bool", a.Expr, t)
	}
	prog, err := env.Program(checked)
	if err != nil {
		return nil, err
	}
	out := &assertion{Assertion: a, prog: prog}
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
				p, err := env.Program(sideAST)
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
	if a.Message != "" {
		head = a.Message + " (" + head + ")"
	}
	if err != nil {
		return head + ": " + err.Error() + hint(err)
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
	return msg
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
	waits := r.waits
	if waits == nil {
		waits = []string{}
	}
	return map[string]any{
		"objects":  objects,
		"status":   runtime.DeepCopyJSONValue(r.status),
		"resource": resource.Object,
		"waits":    waits,
	}
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
