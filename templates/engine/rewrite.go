package engine

// The parse-tree rewrite of structure-safe rendering (see safe.go): every
// printing action ends in valueFunc, or keeps a structural function as such.

import (
	"errors"
	"fmt"
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
			errs = append(errs, refuse(tree, n.Pipe)...)
			if len(n.Pipe.Decl) == 0 {
				rewritePipe(n.Pipe, Location(tree, n), false)
			}
		},
		Branch: func(p *parse.PipeNode) { errs = append(errs, refuse(tree, p)...) },
	}
	if budgeted {
		// Each iteration costs a step, whatever its body (budget.go); a
		// template call runs as an include, which counts its depth.
		w.Range = func(n *parse.RangeNode) {
			if n.List == nil {
				n.List = &parse.ListNode{NodeType: parse.NodeList, Pos: n.Pos}
			}
			n.List.Nodes = slices.Insert(n.List.Nodes, 0, parse.Node(budget.StepAction(n.Pos, n.Line, budget.TurnCost(n.List))))
		}
		w.Listed = func(l *parse.ListNode, i int) {
			if t, ok := l.Nodes[i].(*parse.TemplateNode); ok {
				l.Nodes[i] = templateAsInclude(t)
			}
		}
	}
	w.Walk(tree.Root)
	// Each run of a template, the called ones too, costs a step.
	if tree.Root != nil && budgeted {
		tree.Root.Nodes = slices.Insert(tree.Root.Nodes, 0, parse.Node(budget.StepAction(tree.Root.Pos, 1, 1)))
	}
	return errors.Join(errs...)
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

// isLayout says whether c only lays out what it is given: indent and
// nindent (the piped value is their second argument), quote and squote.
func isLayout(name string) bool {
	switch name {
	case "indent", "nindent", "quote", "squote":
		return true
	}
	return false
}

func isQuoting(name string) bool { return name == "quote" || name == "squote" }

// rewritePipe ends pipe's value in valueFunc before its trailing layout
// commands, or keeps a structural function as such. scalar says the
// result is quoted, so structure cannot stand.
func rewritePipe(pipe *parse.PipeNode, loc string, scalar bool) {
	cmds := pipe.Cmds
	i := len(cmds)
	// The trailing piped layout commands: indent N, nindent N, quote, squote.
	for i > 1 {
		c := cmds[i-1]
		name := funcs.Ident(c)
		piped := (name == "indent" || name == "nindent") && len(c.Args) == 2 || isQuoting(name) && len(c.Args) == 1
		if !piped {
			break
		}
		scalar = scalar || isQuoting(name)
		i--
	}
	last := cmds[i-1]
	name := funcs.Ident(last)
	switch {
	case (name == "indent" || name == "nindent") && len(last.Args) == 3:
		// indent N X: X is the value.
		last.Args[2] = wrapArg(last.Args[2], loc, scalar, last.Pos)
		return
	case isQuoting(name) && len(last.Args) >= 2:
		for k := 1; k < len(last.Args); k++ {
			last.Args[k] = wrapArg(last.Args[k], loc, true, last.Pos)
		}
		return
	case !scalar && structuralFuncs[name] != "":
		last.Args[0].(*parse.IdentifierNode).Ident = structuralFuncs[name]
		return
	}
	pipe.Cmds = slices.Insert(cmds, i, valueCmd(loc, last.Pos))
}

// wrapArg makes arg, an argument of a layout function, print through
// valueFunc: (arg | __stencil_value).
func wrapArg(arg parse.Node, loc string, scalar bool, pos parse.Pos) parse.Node {
	if p, ok := arg.(*parse.PipeNode); ok && len(p.Decl) == 0 {
		rewritePipe(p, loc, scalar)
		return p
	}
	return &parse.PipeNode{NodeType: parse.NodePipe, Pos: pos, Cmds: []*parse.CommandNode{
		{NodeType: parse.NodeCommand, Pos: pos, Args: []parse.Node{arg}},
		valueCmd(loc, pos),
	}}
}

func valueCmd(loc string, pos parse.Pos) *parse.CommandNode {
	return &parse.CommandNode{NodeType: parse.NodeCommand, Pos: pos, Args: []parse.Node{
		parse.NewIdentifier(valueFunc).SetPos(pos),
		&parse.StringNode{NodeType: parse.NodeString, Pos: pos, Quoted: strconv.Quote(loc), Text: loc},
	}}
}
