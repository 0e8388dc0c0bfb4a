package templates

// The parse-tree rewrite of structure-safe rendering (see safe.go): every
// printing action ends in valueFunc, or keeps a structural function as such.

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"text/template/parse"
)

// rewriteTree makes every printing action of tree print through valueFunc
// (or a structural function), and refuses the functions in refusedFuncs.
func rewriteTree(tree *parse.Tree) error {
	var errs []error
	var walk func(n parse.Node)
	walk = func(n parse.Node) {
		switch n := n.(type) {
		case *parse.ListNode:
			if n == nil {
				return
			}
			for _, c := range n.Nodes {
				walk(c)
			}
		case *parse.ActionNode:
			errs = append(errs, refuse(tree, n.Pipe)...)
			if len(n.Pipe.Decl) == 0 {
				rewritePipe(n.Pipe, location(tree, n), false)
			}
		case *parse.IfNode:
			errs = append(errs, refuse(tree, n.Pipe)...)
			walk(n.List)
			walk(n.ElseList)
		case *parse.RangeNode:
			errs = append(errs, refuse(tree, n.Pipe)...)
			walk(n.List)
			walk(n.ElseList)
		case *parse.WithNode:
			errs = append(errs, refuse(tree, n.Pipe)...)
			walk(n.List)
			walk(n.ElseList)
		case *parse.TemplateNode:
			errs = append(errs, refuse(tree, n.Pipe)...)
		}
	}
	walk(tree.Root)
	return errors.Join(errs...)
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
				errs = append(errs, fmt.Errorf("%s: %s", location(tree, n), why))
			}
		}
	}
	walk(pipe)
	return errs
}

// location is "file:line" of n.
func location(tree *parse.Tree, n parse.Node) string {
	loc, _ := tree.ErrorContext(n)
	// ErrorContext gives file:line:col.
	if i := strings.LastIndexByte(loc, ':'); i > 0 {
		loc = loc[:i]
	}
	return loc
}

func identOf(c *parse.CommandNode) string {
	if len(c.Args) == 0 {
		return ""
	}
	if id, ok := c.Args[0].(*parse.IdentifierNode); ok {
		return id.Ident
	}
	return ""
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
		name := identOf(c)
		piped := (name == "indent" || name == "nindent") && len(c.Args) == 2 || isQuoting(name) && len(c.Args) == 1
		if !piped {
			break
		}
		scalar = scalar || isQuoting(name)
		i--
	}
	last := cmds[i-1]
	name := identOf(last)
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
