package templates

import (
	"text/template"
	"text/template/parse"

	"stencil.dev/stencil/contract"
	"stencil.dev/stencil/templates/view"
)

// What a render can see of the resource's status. Stencil writes the
// status itself, and every status patch comes back as a watch event that
// syncs the resource again. Most templates never read .Status: for them
// that sync renders the very children it rendered before. So a render is
// given only what its templates can read of the status (Visible): none
// when no template may read it, the Deployed condition for a chart (its
// .Release.IsUpgrade). The render wall then sees the same request as
// before the patch and answers it from its memo (package renderworker).
//
// "May read" is decided from the parse trees, erring towards yes: a
// template may read the status when it names a field Status anywhere
// (.Status, $.Status, $x.Status, (pipeline).Status), or when the whole
// resource leaves the template's hands as a value, which a function could
// print or walk: . where it is the resource (outside range and with), or
// $, as an argument, a pipeline's value or a variable's. Handing it to
// include or template is not leaving: the template called is read the
// same way, every one of them with . taken to be the resource. A node
// this does not know is taken to read it.

// Visible returns what a render of s reads of parent: parent itself when a
// template may read the status, otherwise a copy (sharing everything
// else) whose Status holds only what the render reads of it.
func (s *Set) Visible(parent *view.Object) *view.Object {
	switch {
	case s.chart != nil:
		st := map[string]any{}
		if deployed(parent) {
			st["conditions"] = []any{map[string]any{"type": contract.ConditionDeployed, "status": "True"}}
		}
		cp := *parent
		cp.Status = st
		return &cp
	case s.seesStatus:
		return parent
	}
	cp := *parent
	cp.Status = map[string]any{}
	return &cp
}

// SeesStatus reports whether a template of the set may read the
// resource's status (.Status), as Visible decides it.
func (s *Set) SeesStatus() bool { return s.seesStatus }

// seesStatus reports whether any template of root may read the
// resource's status.
func seesStatus(root *template.Template) bool {
	for _, t := range root.Templates() {
		if t.Tree != nil && treeSeesStatus(t.Tree.Root) {
			return true
		}
	}
	return false
}

// treeSeesStatus reports whether the template n may read the status, .
// being the resource at its start.
func treeSeesStatus(n parse.Node) bool {
	var sc statusScan
	sc.node(n, true)
	return sc.seen
}

// statusScan walks a parse tree; seen says it may read the status.
type statusScan struct{ seen bool }

// node scans n; root says . is the resource there.
func (sc *statusScan) node(n parse.Node, root bool) {
	switch n := n.(type) {
	case nil:
	case *parse.ListNode:
		if n == nil {
			return
		}
		for _, c := range n.Nodes {
			sc.node(c, root)
		}
	case *parse.TextNode, *parse.CommentNode, *parse.BreakNode, *parse.ContinueNode:
	case *parse.ActionNode:
		sc.pipe(n.Pipe, root)
	case *parse.IfNode:
		sc.pipe(n.Pipe, root)
		sc.node(n.List, root)
		sc.node(n.ElseList, root)
	case *parse.RangeNode:
		sc.rebinds(&n.BranchNode, root)
	case *parse.WithNode:
		sc.rebinds(&n.BranchNode, root)
	case *parse.TemplateNode:
		// {{ template "x" . }}: the template called is scanned itself.
		if n.Pipe != nil && !passesWhole(n.Pipe) {
			sc.pipe(n.Pipe, root)
		}
	default:
		sc.seen = true
	}
}

// rebinds scans a range or a with. Inside, . is (an element of) what the
// pipeline gives: the resource only if the pipeline gives it, which the
// pipeline's own scan has said already. In the else branch . is as
// outside.
func (sc *statusScan) rebinds(b *parse.BranchNode, root bool) {
	sc.pipe(b.Pipe, root)
	sc.node(b.List, false)
	sc.node(b.ElseList, root)
}

// pipe scans a pipeline in which . is the resource when root says so.
func (sc *statusScan) pipe(p *parse.PipeNode, root bool) {
	if p == nil {
		return
	}
	for _, c := range p.Cmds {
		include := len(c.Args) == 3 && isIdent(c.Args[0], "include")
		for i, a := range c.Args {
			if include && i == 2 && isWhole(a) {
				// include "x" .: the template called is scanned itself.
				continue
			}
			sc.arg(a, root)
		}
	}
}

// arg scans one operand of a command.
func (sc *statusScan) arg(a parse.Node, root bool) {
	switch a := a.(type) {
	case *parse.FieldNode:
		sc.fields(a.Ident)
	case *parse.VariableNode:
		if len(a.Ident) == 1 && a.Ident[0] == "$" {
			sc.seen = true // $ as a value: the whole resource
		}
		sc.fields(a.Ident[1:])
	case *parse.ChainNode:
		sc.fields(a.Field)
		sc.arg(a.Node, root)
	case *parse.DotNode:
		if root {
			sc.seen = true // . as a value, where it is the resource
		}
	case *parse.PipeNode:
		sc.pipe(a, root)
	case *parse.IdentifierNode, *parse.StringNode, *parse.NumberNode, *parse.BoolNode, *parse.NilNode:
	default:
		sc.seen = true
	}
}

// fields marks the scan seen when a field along the path is Status.
func (sc *statusScan) fields(path []string) {
	for _, f := range path {
		if f == "Status" {
			sc.seen = true
		}
	}
}

// isIdent reports whether n is the function name.
func isIdent(n parse.Node, name string) bool {
	id, ok := n.(*parse.IdentifierNode)
	return ok && id.Ident == name
}

// isWhole reports whether n is . or $: the value a template is called
// with, when it hands on the resource.
func isWhole(n parse.Node) bool {
	switch n := n.(type) {
	case *parse.DotNode:
		return true
	case *parse.VariableNode:
		return len(n.Ident) == 1 && n.Ident[0] == "$"
	}
	return false
}

// passesWhole reports whether p is just . or $, declaring nothing.
func passesWhole(p *parse.PipeNode) bool {
	return len(p.Decl) == 0 && len(p.Cmds) == 1 && len(p.Cmds[0].Args) == 1 && isWhole(p.Cmds[0].Args[0])
}
