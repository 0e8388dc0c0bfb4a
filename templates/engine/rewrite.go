package engine

// The parse-tree rewrite of structure-safe rendering (see safe.go): every
// printing action ends in valueFunc, or keeps a structural function as such.

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/template/parse"

	"stencil.dev/stencil/templates/budget"
	"stencil.dev/stencil/templates/funcs"
)

// Walker visits the nodes of a parsed template that hold pipes, for a
// rewrite: both template modes rewrite through it, so they meet the same
// nodes in the same order. Action is called for each action, Branch for
// the pipe of each if, with, range and template call (before its lists),
// Range for each range once its lists are walked, and Listed for each
// node of a list once it is walked (a rewrite may replace it). A nil
// function is not called.
type Walker struct {
	Action func(*parse.ActionNode)
	Branch func(*parse.PipeNode)
	Range  func(*parse.RangeNode)
	Listed func(list *parse.ListNode, i int)
}

// Walk walks n and what it holds.
func (w Walker) Walk(n parse.Node) {
	call := func(f func(*parse.PipeNode), p *parse.PipeNode) {
		if f != nil {
			f(p)
		}
	}
	switch n := n.(type) {
	case *parse.ListNode:
		if n == nil {
			return
		}
		for i, c := range n.Nodes {
			w.Walk(c)
			if w.Listed != nil {
				w.Listed(n, i)
			}
		}
	case *parse.ActionNode:
		if w.Action != nil {
			w.Action(n)
		}
	case *parse.IfNode:
		call(w.Branch, n.Pipe)
		w.Walk(n.List)
		w.Walk(n.ElseList)
	case *parse.WithNode:
		call(w.Branch, n.Pipe)
		w.Walk(n.List)
		w.Walk(n.ElseList)
	case *parse.RangeNode:
		call(w.Branch, n.Pipe)
		w.Walk(n.List)
		w.Walk(n.ElseList)
		if w.Range != nil {
			w.Range(n)
		}
	case *parse.TemplateNode:
		call(w.Branch, n.Pipe)
	}
}

// Rewrite makes every printing action of tree print through valueFunc
// (or a structural function), and refuses the functions in refusedFuncs.
func Rewrite(tree *parse.Tree, budgeted bool) error {
	var errs []error
	w := Walker{
		Action: func(n *parse.ActionNode) {
			if len(n.Pipe.Decl) == 0 {
				ownPrinting.Rewrite(n.Pipe, Location(tree, n))
			}
			errs = append(errs, refuse(tree, n.Pipe)...)
		},
		Branch: func(p *parse.PipeNode) { errs = append(errs, refuse(tree, p)...) },
	}
	if budgeted {
		// Each iteration costs a step, whatever its body (budget.go); a
		// template call runs as an include, which counts its depth.
		w.Range = func(n *parse.RangeNode) { budget.StepTurn(n, false) }
		w.Listed = func(l *parse.ListNode, i int) {
			if t, ok := l.Nodes[i].(*parse.TemplateNode); ok {
				l.Nodes[i] = templateAsInclude(t)
			}
		}
	}
	w.Walk(tree.Root)
	// Each run of a template, the called ones too, costs a step.
	if tree.Root != nil && budgeted {
		budget.StepRun(tree.Root, false)
	}
	return errors.Join(errs...)
}

// ownPrinting is the printing rewrite of own templates: a value ends in
// valueFunc, and a structural function that ends a printing action
// unquoted keeps its structure (structuralFuncs).
var ownPrinting = Printing{
	Value: valueFunc,
	Printed: func(c *parse.CommandNode, scalar bool) bool {
		internal := structuralFuncs[funcs.Ident(c)]
		if scalar || internal == "" {
			return false
		}
		c.Args[0].(*parse.IdentifierNode).Ident = internal
		return true
	},
}

// templateAsInclude turns {{ template "name" pipe }} into the structural
// include of the same template and data, whose nesting the budget bounds
// (text/template's own bound on template calls is 100,000 deep, and the
// stack of that many is hundreds of megabytes).
func templateAsInclude(t *parse.TemplateNode) *parse.ActionNode {
	var data parse.Node = &parse.NilNode{NodeType: parse.NodeNil, Pos: t.Pos}
	if t.Pipe != nil {
		data = t.Pipe
	}
	return &parse.ActionNode{NodeType: parse.NodeAction, Pos: t.Pos, Line: t.Line, Pipe: &parse.PipeNode{
		NodeType: parse.NodePipe, Pos: t.Pos, Line: t.Line,
		Cmds: []*parse.CommandNode{{NodeType: parse.NodeCommand, Pos: t.Pos, Args: []parse.Node{
			parse.NewIdentifier(includeStruct).SetPos(t.Pos),
			&parse.StringNode{NodeType: parse.NodeString, Pos: t.Pos, Quoted: strconv.Quote(t.Name), Text: t.Name},
			data,
		}}},
	}}
}

// refuse reports every call of a refused function in pipe.
func refuse(tree *parse.Tree, pipe *parse.PipeNode) []error {
	if pipe == nil {
		return nil
	}
	var errs []error
	var walk func(n parse.Node)
	walk = func(n parse.Node) {
		switch n := n.(type) {
		case *parse.PipeNode:
			for _, c := range n.Cmds {
				walk(c)
			}
		case *parse.CommandNode:
			for _, a := range n.Args {
				walk(a)
			}
		case *parse.IdentifierNode:
			if why, ok := refusedFuncs[n.Ident]; ok {
				errs = append(errs, fmt.Errorf("%s: %s", Location(tree, n), why))
			}
		}
	}
	walk(pipe)
	return errs
}

// Location is "file:line" of n, for an error or a placed value.
func Location(tree *parse.Tree, n parse.Node) string {
	loc, _ := tree.ErrorContext(n)
	// ErrorContext gives file:line:col.
	if i := strings.LastIndexByte(loc, ':'); i > 0 {
		loc = loc[:i]
	}
	return loc
}

// Printing is how a template mode ends a printing action: the rewrite
// both modes run, which differ only in the function a value ends in and
// in what they make of the layouts and of the command whose result is
// printed.
type Printing struct {
	// Value is the function the printed value ends in, given the
	// action's "file:line": {{ X | Value "file:line" | nindent 4 }}.
	Value string
	// Layout, when set, is called on each layout command that lays out
	// what Value returns (chart mode binds copies of its own).
	Layout func(*parse.CommandNode)
	// Printed, when set, is called on the command whose result is
	// printed; scalar says a quoting layout makes it one scalar. It
	// returns true when it kept the command's result as it is (own
	// templates' structural functions): no Value follows it.
	Printed func(c *parse.CommandNode, scalar bool) (kept bool)
}

// layouts are the functions that only lay out the value they are given,
// which the printing rewrite keeps after Value, so that they lay out what
// Value returns where the author meant the value to go: indent and
// nindent take their width before the value (indent N X, X | indent N),
// quote and squote quote each of their arguments, which makes each one
// scalar.
var layouts = map[string]struct{ quotes bool }{
	"indent": {}, "nindent": {}, "quote": {quotes: true}, "squote": {quotes: true},
}

// Layouts lists the layout functions the printing rewrite keeps after
// Value, sorted: chart mode binds its own copy of each.
func Layouts() []string { return slices.Sorted(maps.Keys(layouts)) }

// piped reports whether c lays out the value piped into it: indent N,
// nindent N, quote, squote; quotes says it quotes it.
func piped(c *parse.CommandNode) (ok, quotes bool) {
	l, ok := layouts[funcs.Ident(c)]
	if !ok {
		return false, false
	}
	if l.quotes {
		return len(c.Args) == 1, true
	}
	return len(c.Args) == 2, false
}

// Rewrite ends pipe's value in p.Value before its trailing layout
// commands, or keeps it as p.Printed says; loc is the action's
// "file:line".
func (p Printing) Rewrite(pipe *parse.PipeNode, loc string) { p.rewrite(pipe, loc, false) }

// rewrite is Rewrite; scalar says the result is quoted, so structure
// cannot stand.
func (p Printing) rewrite(pipe *parse.PipeNode, loc string, scalar bool) {
	cmds := pipe.Cmds
	i := len(cmds)
	// The trailing piped layout commands.
	for i > 1 {
		c := cmds[i-1]
		ok, quotes := piped(c)
		if !ok {
			break
		}
		scalar = scalar || quotes
		p.layout(c)
		i--
	}
	last := cmds[i-1]
	if l, ok := layouts[funcs.Ident(last)]; ok {
		switch {
		case !l.quotes && len(last.Args) == 3:
			// indent N X: X is the value.
			last.Args[2] = p.wrapArg(last.Args[2], loc, scalar, last.Pos)
			p.layout(last)
			return
		case l.quotes && len(last.Args) >= 2:
			for k := 1; k < len(last.Args); k++ {
				last.Args[k] = p.wrapArg(last.Args[k], loc, true, last.Pos)
			}
			p.layout(last)
			return
		}
	}
	if p.Printed != nil && p.Printed(last, scalar) {
		return
	}
	pipe.Cmds = slices.Insert(cmds, i, p.valueCmd(loc, last.Pos))
}

func (p Printing) layout(c *parse.CommandNode) {
	if p.Layout != nil {
		p.Layout(c)
	}
}

// wrapArg makes arg, the value a layout function is given, end in
// p.Value as a printing pipe does: (arg | Value "file:line").
func (p Printing) wrapArg(arg parse.Node, loc string, scalar bool, pos parse.Pos) parse.Node {
	if sub, ok := arg.(*parse.PipeNode); ok && len(sub.Decl) == 0 {
		p.rewrite(sub, loc, scalar)
		return sub
	}
	return &parse.PipeNode{NodeType: parse.NodePipe, Pos: pos, Cmds: []*parse.CommandNode{
		{NodeType: parse.NodeCommand, Pos: pos, Args: []parse.Node{arg}},
		p.valueCmd(loc, pos),
	}}
}

func (p Printing) valueCmd(loc string, pos parse.Pos) *parse.CommandNode {
	return &parse.CommandNode{NodeType: parse.NodeCommand, Pos: pos, Args: []parse.Node{
		parse.NewIdentifier(p.Value).SetPos(pos),
		&parse.StringNode{NodeType: parse.NodeString, Pos: pos, Quoted: strconv.Quote(loc), Text: loc},
	}}
}
