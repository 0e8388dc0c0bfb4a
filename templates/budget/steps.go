package budget

import (
	"strconv"
	"text/template/parse"

	"stencil.dev/stencil/templates/funcs"
)

// The price of a template's text in steps: what the rewrite (package
// engine, and chart mode's) counts where a body starts and a range turns,
// so that a loop or a recursion is counted where it turns, whatever its
// body.

// StepAction is {{ __stencil_step N }}: it prints nothing and counts N
// steps. The rewrite puts one at the start of every template body and
// every range turn (TurnCost).
func StepAction(pos parse.Pos, line int, n int64) *parse.ActionNode {
	num := &parse.NumberNode{NodeType: parse.NodeNumber, Pos: pos, IsInt: true, Int64: n, Text: strconv.FormatInt(n, 10)}
	return &parse.ActionNode{NodeType: parse.NodeAction, Pos: pos, Line: line, Pipe: &parse.PipeNode{
		NodeType: parse.NodePipe, Pos: pos, Line: line,
		Cmds: []*parse.CommandNode{{NodeType: parse.NodeCommand, Pos: pos, Args: []parse.Node{parse.NewIdentifier(StepFunc).SetPos(pos), num}}},
	}}
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

// TurnCost is what one turn of a range over list costs, known from its
// text: its body, plus the step's own call, which costs what an action does
// (an empty turn is about 1 µs, two steps, as a busy turn is about 0.5 µs a
// step).
func TurnCost(list *parse.ListNode) int64 { return cost(list) + 1 }
