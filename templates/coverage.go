package templates

import (
	"slices"
	"strconv"
	"sync/atomic"
	"text/template"
	"text/template/parse"

	"stencil.dev/stencil/templates/engine"
)

// Coverage records which branches of own templates renders took, for
// "stencil test --coverage": each if, with and range has two, its body and
// its else (an absent else is the branch where the condition was false, or
// the range empty). A Set loaded with Options.Coverage has a call that
// prints nothing at the start of each branch; the calls record here.
// Chart entries are not instrumented (their templates are the chart's).
type Coverage struct {
	branches []Branch
	hits     []*atomic.Int64
}

// Branch is one branch of a template.
type Branch struct {
	// Template is the file; Location its file:line.
	Template, Location string
	// Kind is "if", "else of if", "with", "else of with", "range" or
	// "else of range".
	Kind string
}

// coverFunc is the call at the start of each branch: {{ __stencil_cover N }}.
const coverFunc = "__stencil_cover"

// NewCoverage returns an empty Coverage for Options.Coverage.
func NewCoverage() *Coverage { return &Coverage{} }

// Branches returns every branch and how often renders took it, in the
// order the templates were loaded.
func (c *Coverage) Branches() ([]Branch, []int64) {
	taken := make([]int64, len(c.branches))
	for i := range c.branches {
		taken[i] = c.hits[i].Load()
	}
	return slices.Clone(c.branches), taken
}

// instrument adds the branch calls to every tree of root not seen yet,
// each branch named after file (the tree's parse name) and its line.
func (c *Coverage) instrument(root *template.Template) {
	start := len(c.branches)
	for _, t := range root.Templates() {
		if t.Tree == nil || t.Tree.Root == nil {
			continue
		}
		tree := t.Tree
		var visit func(n parse.Node)
		mark := func(l **parse.ListNode, n parse.Node, kind string) {
			if *l == nil {
				*l = &parse.ListNode{NodeType: parse.NodeList, Pos: n.Position()}
			}
			id := len(c.branches)
			c.branches = append(c.branches, Branch{Template: tree.ParseName, Location: engine.Location(tree, n), Kind: kind})
			num := &parse.NumberNode{NodeType: parse.NodeNumber, Pos: n.Position(), IsInt: true, Int64: int64(id), Text: strconv.Itoa(id)}
			call := &parse.ActionNode{NodeType: parse.NodeAction, Pos: n.Position(), Pipe: &parse.PipeNode{NodeType: parse.NodePipe, Pos: n.Position(),
				Cmds: []*parse.CommandNode{{NodeType: parse.NodeCommand, Pos: n.Position(), Args: []parse.Node{parse.NewIdentifier(coverFunc).SetPos(n.Position()), num}}}}}
			(*l).Nodes = slices.Insert((*l).Nodes, 0, parse.Node(call))
		}
		visit = func(n parse.Node) {
			switch n := n.(type) {
			case *parse.ListNode:
				if n == nil {
					return
				}
				for _, c := range slices.Clone(n.Nodes) {
					visit(c)
				}
			case *parse.IfNode:
				visit(n.List)
				visit(n.ElseList)
				mark(&n.List, n, "if")
				mark(&n.ElseList, n, "else of if")
			case *parse.WithNode:
				visit(n.List)
				visit(n.ElseList)
				mark(&n.List, n, "with")
				mark(&n.ElseList, n, "else of with")
			case *parse.RangeNode:
				visit(n.List)
				visit(n.ElseList)
				mark(&n.List, n, "range")
				mark(&n.ElseList, n, "else of range")
			}
		}
		visit(tree.Root)
	}
	for range len(c.branches) - start {
		c.hits = append(c.hits, new(atomic.Int64))
	}
	root.Funcs(template.FuncMap{coverFunc: func(id int) string {
		c.hits[id].Add(1)
		return ""
	}})
}
