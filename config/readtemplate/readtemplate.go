// Package readtemplate parses the templates of computed reads: a read's
// objectName, or a value of its selector, written as a template over the
// resource ({{ .Spec.passwordSecret }}) and run in the controller when the
// read is resolved. Package config parses each once per load (Parse);
// package templates runs them.
//
// The choice a newcomer may question: such a template is not given a
// render budget, as a child's template is; it is held by construction to a
// kind whose cost is at most its own length times the resource's size.
// It runs in the controller, outside the render wall (the worker
// processes the kernel bounds), so what it may do is refused at load:
// field references, if, with and a few linear builtins; no range, no
// template or block, no printf.
package readtemplate

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"text/template"
	"text/template/parse"
)

// funcs are the functions a computed read name or label value may call:
// text/template's builtins whose cost is at most linear in what they are
// given (a field of the resource, whose size the API server bounds), and
// none that loops or pads (printf's width).
var funcs = map[string]bool{
	"print": true, "index": true, "len": true, "not": true, "and": true, "or": true,
	"eq": true, "ne": true, "lt": true, "le": true, "gt": true, "ge": true,
}

// Parse parses a computed read name or label value (a template over the
// resource, run in the controller when the read is resolved), named name.
// Such a template runs outside the render wall, so it is held to a kind
// whose cost is bounded by its own length times the resource's size:
// field references, if and with, and the builtins funcs names; no range,
// no template or block, no printf. Executed over an object the API server
// stores (at most about 1.5 MiB), it cannot loop, nest loops or pad,
// whatever the tenant's values (TestReadTemplatesAreBounded).
func Parse(name, text string) (*template.Template, error) {
	t, err := template.New(name).Option("missingkey=zero").Parse(text)
	if err != nil {
		return nil, fmt.Errorf("does not parse as a template: %w", err)
	}
	for _, tt := range t.Templates() {
		if tt.Name() != name {
			return nil, fmt.Errorf("defines template %q: a computed name is one expression over the resource (field references, if, with and %s)", tt.Name(), strings.Join(slices.Sorted(maps.Keys(funcs)), ", "))
		}
		if tt.Tree != nil {
			if err := bounded(tt.Tree.Root); err != nil {
				return nil, fmt.Errorf("%w: a computed name runs in the controller, so it takes field references, if, with and %s only", err, strings.Join(slices.Sorted(maps.Keys(funcs)), ", "))
			}
		}
	}
	return t, nil
}

// bounded refuses every node of a read template that could cost more
// than linear work in the resource: loops, template calls and functions
// outside funcs.
func bounded(n parse.Node) error {
	switch x := n.(type) {
	case nil:
		return nil
	case *parse.ListNode:
		if x == nil {
			return nil
		}
		for _, c := range x.Nodes {
			if err := bounded(c); err != nil {
				return err
			}
		}
	case *parse.TextNode, *parse.CommentNode, *parse.FieldNode, *parse.VariableNode, *parse.DotNode,
		*parse.StringNode, *parse.NumberNode, *parse.BoolNode, *parse.NilNode:
	case *parse.ActionNode:
		return bounded(x.Pipe)
	case *parse.PipeNode:
		if x == nil {
			return nil
		}
		for _, c := range x.Cmds {
			if err := bounded(c); err != nil {
				return err
			}
		}
	case *parse.CommandNode:
		for _, a := range x.Args {
			if err := bounded(a); err != nil {
				return err
			}
		}
	case *parse.ChainNode:
		return bounded(x.Node)
	case *parse.IdentifierNode:
		if !funcs[x.Ident] {
			return fmt.Errorf("calls %s", x.Ident)
		}
	case *parse.IfNode:
		return boundedBranch(&x.BranchNode)
	case *parse.WithNode:
		return boundedBranch(&x.BranchNode)
	case *parse.RangeNode:
		return errors.New("ranges")
	case *parse.TemplateNode:
		return fmt.Errorf("calls template %q", x.Name)
	default:
		return fmt.Errorf("holds %s", n)
	}
	return nil
}

// boundedBranch checks an if's or with's pipeline and both its lists.
func boundedBranch(b *parse.BranchNode) error {
	for _, n := range []parse.Node{b.Pipe, b.List, b.ElseList} {
		if err := bounded(n); err != nil {
			return err
		}
	}
	return nil
}
