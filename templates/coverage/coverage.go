// Package coverage records which branches of the templates renders take,
// for "stencil test --coverage": own templates and a chart's, by file and
// line.
//
// The choice a newcomer may question: branches are counted by a call the
// template itself makes ({{ __stencil_cover N }} at the start of each
// branch, added to the parsed tree), not by tracing the executor: the
// same instrumented tree runs through the same render path as every other
// render, so a covered branch is one a real render took.
package coverage

import (
	"slices"
	"strconv"
	"sync"
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
// A chart entry's templates are instrumented the same way, as the chart
// parses them (chart.Chart.Instrument): every executor's parse of a file
// counts into the same branches, by file and position.
type Coverage struct {
	// mu guards branches, hits and ids: a chart's executors are parsed,
	// and instrumented, while other renders run.
	mu       sync.Mutex
	branches []Branch
	hits     []*atomic.Int64
	// ids numbers each branch by where it is: a template parsed again
	// (another executor of a chart) counts into the same branch.
	ids map[branchKey]int
}

// branchKey is where a branch is: the file, the template (a define) and
// the position of its if, with or range, and which of its two it is.
type branchKey struct {
	file, template string
	pos            parse.Pos
	kind           string
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

// New returns an empty Coverage for templates.Options.Coverage.
func New() *Coverage { return &Coverage{} }

// Branches returns every branch and how often renders took it, in the
// order the templates were loaded.
func (c *Coverage) Branches() ([]Branch, []int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	taken := make([]int64, len(c.branches))
	for i := range c.branches {
		taken[i] = c.hits[i].Load()
	}
	return slices.Clone(c.branches), taken
}

// Instrument adds the branch calls to every tree of root not instrumented
// yet, each branch named after file (the tree's parse name) and its line;
// a tree parsed from the same text as one before counts into its
// branches. Load calls it on own templates; chart.Chart.Instrument on each
// parse of a chart's.
func (c *Coverage) Instrument(root *template.Template) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ids == nil {
		c.ids = map[branchKey]int{}
	}
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
			if len((*l).Nodes) > 0 && isCoverCall((*l).Nodes[0]) {
				return // instrumented already (a tree root shares with a clone)
			}
			key := branchKey{file: tree.ParseName, template: tree.Name, pos: n.Position(), kind: kind}
			id, seen := c.ids[key]
			if !seen {
				id = len(c.branches)
				c.ids[key] = id
				c.branches = append(c.branches, Branch{Template: tree.ParseName, Location: engine.Location(tree, n), Kind: kind})
				c.hits = append(c.hits, new(atomic.Int64))
			}
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
	root.Funcs(template.FuncMap{coverFunc: func(id int) string {
		c.mu.Lock()
		hit := c.hits[id]
		c.mu.Unlock()
		hit.Add(1)
		return ""
	}})
}

// isCoverCall says whether n is a branch call Instrument added.
func isCoverCall(n parse.Node) bool {
	a, ok := n.(*parse.ActionNode)
	if !ok || len(a.Pipe.Cmds) != 1 || len(a.Pipe.Cmds[0].Args) == 0 {
		return false
	}
	id, ok := a.Pipe.Cmds[0].Args[0].(*parse.IdentifierNode)
	return ok && id.Ident == coverFunc
}
