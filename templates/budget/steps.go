package budget

import (
	"slices"
	"strconv"
	"text/template/parse"

	"stencil.dev/stencil/templates/funcs"
)

// The price of a template's text in steps: what the rewrite (package
// engine, and chart mode's) counts where a body starts and a range turns,
// so that a loop or a recursion is counted where it turns, whatever its
// body.

// StepRun makes each run of the template body root cost a step, the
// templates it calls included: the rewrite of both template modes puts
// it at the start of every tree. printed says the mode's writer is not
// stencil's (chart mode), so the step also counts the literal text the
// body prints (StepTextFunc).
func StepRun(root *parse.ListNode, printed bool) {
	root.Nodes = slices.Insert(root.Nodes, 0, parse.Node(stepAction(root.Pos, 1, 1, literalOf(root, printed))))
}

// StepTurn makes each turn of range n cost turnCost of its body, whatever
// the body does; printed as for StepRun. The rewrites call it once n's
// lists are rewritten, so that the price is that of the text that runs.
func StepTurn(n *parse.RangeNode, printed bool) {
	if n.List == nil {
		n.List = &parse.ListNode{NodeType: parse.NodeList, Pos: n.Pos}
	}
	n.List.Nodes = slices.Insert(n.List.Nodes, 0, parse.Node(stepAction(n.Pos, n.Line, turnCost(n.List), literalOf(n.List, printed))))
}

// stepAction is {{ __stencil_step N }}, or {{ __stencil_step_text N B }}
// where the body prints B bytes of literal text: it prints nothing and
// counts N steps (and B bytes printed).
func stepAction(pos parse.Pos, line int, steps, bytes int64) *parse.ActionNode {
	args := []parse.Node{parse.NewIdentifier(StepFunc).SetPos(pos), number(pos, steps)}
	if bytes > 0 {
		args[0] = parse.NewIdentifier(StepTextFunc).SetPos(pos)
		args = append(args, number(pos, bytes))
	}
	return &parse.ActionNode{NodeType: parse.NodeAction, Pos: pos, Line: line, Pipe: &parse.PipeNode{
		NodeType: parse.NodePipe, Pos: pos, Line: line,
		Cmds: []*parse.CommandNode{{NodeType: parse.NodeCommand, Pos: pos, Args: args}},
	}}
}

func number(pos parse.Pos, n int64) *parse.NumberNode {
	return &parse.NumberNode{NodeType: parse.NodeNumber, Pos: pos, IsInt: true, Int64: n, Text: strconv.FormatInt(n, 10)}
}

// literalOf is literal(list) where printed, else 0.
func literalOf(list *parse.ListNode, printed bool) int64 {
	if !printed {
		return 0
	}
	return literal(list)
}

// literal is the bytes of literal text one run of list prints at most:
// its own and its branches' (a range inside counts its own per turn).
func literal(list *parse.ListNode) int64 {
	if list == nil {
		return 0
	}
	var n int64
	for _, node := range list.Nodes {
		switch node := node.(type) {
		case *parse.TextNode:
			n += int64(len(node.Text))
		case *parse.IfNode:
			n += literal(node.List) + literal(node.ElseList)
		case *parse.WithNode:
			n += literal(node.List) + literal(node.ElseList)
		case *parse.RangeNode:
			n += literal(node.ElseList)
		}
	}
	return n
}

// builtins are text/template's functions that Wrap does not wrap:
// and and or short-circuit only as builtins, the others are cheap.
var builtins = map[string]bool{"and": true, "or": true, "not": true, "eq": true, "ne": true, "lt": true,
	"le": true, "gt": true, "ge": true, "len": true, "index": true, "slice": true, "call": true}

// cost is what one run of list costs in steps, known from its text: one
// per action and condition, and one per call of a builtin. A range inside
// it counts its own iterations; the wrapped functions it calls count
// themselves and what they return.
func cost(list *parse.ListNode) int64 {
	if list == nil {
		return 1
	}
	var n int64 = 1
	var pipe func(p *parse.PipeNode)
	pipe = func(p *parse.PipeNode) {
		if p == nil {
			return
		}
		for _, c := range p.Cmds {
			if builtins[funcs.Ident(c)] {
				// The wrapped functions count their own calls.
				n++
			}
			for _, a := range c.Args {
				if sub, ok := a.(*parse.PipeNode); ok {
					pipe(sub)
				}
			}
		}
	}
	for _, node := range list.Nodes {
		switch node := node.(type) {
		case *parse.ActionNode:
			n++
			pipe(node.Pipe)
		case *parse.IfNode:
			n++
			pipe(node.Pipe)
			n += cost(node.List) + cost(node.ElseList)
		case *parse.WithNode:
			n++
			pipe(node.Pipe)
			n += cost(node.List) + cost(node.ElseList)
		case *parse.RangeNode:
			n++
			pipe(node.Pipe)
		case *parse.TemplateNode:
			n++
		}
	}
	return n
}

// turnCost is what one turn of a range over list costs, known from its
// text: its body, plus the step's own call, which costs what an action does
// (an empty turn is about 1 µs, two steps, as a busy turn is about 0.5 µs a
// step).
func turnCost(list *parse.ListNode) int64 { return cost(list) + 1 }
