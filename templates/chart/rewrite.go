package chart

// The load-time rewrite of a chart's templates: the same idea as
// package engine's for stencil's own templates (every printing action ends
// in a function that decides how its value lands), made for Helm's
// idioms, and written back as template text that Helm's engine parses.

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"text/template/parse"

	"stencil.dev/stencil/templates/budget"
	"stencil.dev/stencil/templates/engine"
	"stencil.dev/stencil/templates/funcs"
)

// Internal functions the rewritten templates call (bound per render in
// safe.go).
const (
	// valueFunc ends a printing action: a value that holds a tenant's
	// string that YAML would read as syntax lands as one scalar, unless a
	// serialiser wrote it (safe.go), whatever function made it.
	valueFunc = "__chart_value"
	// resolveFunc follows include and tpl where their text is given to a
	// function: it gets the values, not placeholders.
	resolveFunc = "__chart_resolve"
	// refusedFunc replaces a call of a function whose result differs on
	// every render, so that the failure names the template and line.
	refusedFunc = "__chart_refused"
	// costFunc comes before each of Helm's own functions that serialise
	// or parse (funcs.HelmOwn and funcs.Serialiser or funcs.Parser):
	// {{ toYaml (__chart_cost "toYaml" X) }} charges what Helm's function
	// will do with X, and refuses what would be too large, before it runs;
	// it returns X as the function must see it (safe.go, before).
	costFunc = "__chart_cost"
	// tplTextFunc rewrites the text tpl is given as the chart's templates
	// are rewritten at load, so that the text tpl runs is counted and
	// printed through valueFunc too; tplEndFunc follows the tpl, so that
	// the nesting of tpl is bounded as include's is.
	tplTextFunc = "__chart_tpl_text"
	tplEndFunc  = "__chart_tpl_end"
	// afterFunc follows each of Helm's functions that costFunc precedes:
	// a serialiser's placeholders are quoted, a parser's result of
	// tenant text is tainted.
	afterFunc = "__chart_after"
	// literalFunc is the text of a tpl given tenant text: it prints the
	// text, it does not run it.
	literalFunc = "__chart_literal"
	// layoutPrefix names stencil's copies of the layout functions
	// (engine.Layouts) where they lay out what valueFunc printed.
	layoutPrefix = "__chart_layout_"
)

// internalPrefixes start the names of the rewrite's functions: text given
// to tpl may not call them.
var internalPrefixes = []string{"__chart_", "__stencil_"}

// rewriteFile rewrites one template file of a chart (name as Helm names
// it, e.g. "podinfo/templates/deployment.yaml") and returns the text
// Helm's engine will parse. Lines are kept: an action, a define or a
// condition starts on the line it started on in src, so that Helm's own
// errors (required, fail, a missing function) name the chart's lines.
func rewriteFile(name, src string) (string, error) {
	t := parse.New(name)
	t.Mode = parse.SkipFuncCheck
	trees := map[string]*parse.Tree{}
	if _, err := t.Parse(src, "", "", trees); err != nil {
		return "", err
	}
	type block struct {
		define string // "" for the file's own body
		pos    parse.Pos
		nodes  []parse.Node
	}
	var blocks []block
	for tname, tree := range trees {
		if tree.Root == nil {
			continue
		}
		rewriteTree(tree)
		if tname == name {
			for _, n := range tree.Root.Nodes {
				blocks = append(blocks, block{pos: n.Position(), nodes: []parse.Node{n}})
			}
			continue
		}
		blocks = append(blocks, block{define: tname, pos: tree.Root.Pos, nodes: tree.Root.Nodes})
	}
	slices.SortStableFunc(blocks, func(a, b block) int { return int(a.pos - b.pos) })
	w := &writer{src: src, line: 1}
	for _, b := range blocks {
		if b.define == "" {
			w.node(b.nodes[0])
			continue
		}
		w.open(b.pos, "define")
		w.WriteString(strconv.Quote(b.define) + "}}")
		for _, n := range b.nodes {
			w.node(n)
		}
		w.WriteString("{{end}}")
	}
	return w.String(), nil
}

// rewriteTree rewrites one parsed template in place: printing actions end
// in valueFunc, include and tpl given to a function are
// resolved, refused functions are replaced, and each run of the template
// and each iteration of a range counts against the render budget, the
// literal text it prints too (Helm's writer is not stencil's to bound).
func rewriteTree(tree *parse.Tree) {
	cores := map[*parse.CommandNode]bool{}
	printing := engine.Printing{Value: valueFunc, Layout: layout, Printed: func(c *parse.CommandNode, _ bool) bool {
		markCores(c, cores)
		return false
	}}
	engine.Walker{
		Action: func(n *parse.ActionNode) {
			if len(n.Pipe.Decl) == 0 {
				printing.Rewrite(n.Pipe, engine.Location(tree, n))
			}
			pipes(tree, n.Pipe, false, cores)
		},
		Branch: func(p *parse.PipeNode) { pipes(tree, p, false, cores) },
		Range:  func(n *parse.RangeNode) { budget.StepTurn(n, true) },
	}.Walk(tree.Root)
	budget.StepRun(tree.Root, true)
}

// markCores marks c, the command whose result a printing action prints,
// as a core: what it returns is printed, and through a parenthesized
// pipe that is the whole command, {{ (include "x" .) | nindent 4 }}, what
// that pipe's last command returns: structure, not text given to a
// function, which pipes leaves unresolved.
func markCores(c *parse.CommandNode, cores map[*parse.CommandNode]bool) {
	for {
		if funcs.Is(funcs.Ident(c), funcs.Serialiser|funcs.RendersText) {
			cores[c] = true
		}
		if len(c.Args) != 1 {
			return
		}
		inner, ok := c.Args[0].(*parse.PipeNode)
		if !ok || len(inner.Decl) > 0 || len(inner.Cmds) == 0 {
			return
		}
		c = inner.Cmds[len(inner.Cmds)-1]
	}
}

// layout makes c, a layout command after valueFunc, call stencil's own
// copy of its function: it lays out the placeholder valueFunc printed,
// where the function the chart's code calls would resolve it.
func layout(c *parse.CommandNode) {
	c.Args[0] = parse.NewIdentifier(layoutPrefix + funcs.Ident(c)).SetPos(c.Pos)
}

// pipes walks pipe and the pipes nested in its arguments: include and tpl
// whose text a function takes (a later command, or an argument) are
// resolved; refused functions are replaced by refusedFunc. arg says pipe
// is an argument of a command.
func pipes(tree *parse.Tree, pipe *parse.PipeNode, arg bool, cores map[*parse.CommandNode]bool) {
	if pipe == nil {
		return
	}
	for i := 0; i < len(pipe.Cmds); i++ {
		c := pipe.Cmds[i]
		for _, a := range c.Args {
			if sub, ok := a.(*parse.PipeNode); ok {
				pipes(tree, sub, true, cores)
			}
		}
		name := funcs.Ident(c)
		if funcs.Is(name, random) {
			loc := engine.Location(tree, c)
			c.Args = slices.Insert(c.Args[1:], 0, parse.Node(parse.NewIdentifier(refusedFunc).SetPos(c.Pos)),
				parse.Node(str(loc+" "+name, c.Pos)))
			continue
		}
		if funcs.Is(name, funcs.HelmOwn) && funcs.Is(name, funcs.Serialiser|funcs.Parser) {
			i += meter(pipe, i, name)
			c = pipe.Cmds[i]
		}
		if name == "tpl" && len(c.Args) > 1 {
			c.Args[1] = &parse.PipeNode{NodeType: parse.NodePipe, Pos: c.Pos, Cmds: []*parse.CommandNode{
				{NodeType: parse.NodeCommand, Pos: c.Pos, Args: []parse.Node{parse.NewIdentifier(tplTextFunc).SetPos(c.Pos), c.Args[1]}},
			}}
			pipe.Cmds = slices.Insert(pipe.Cmds, i+1, &parse.CommandNode{NodeType: parse.NodeCommand, Pos: c.Pos,
				Args: []parse.Node{parse.NewIdentifier(tplEndFunc).SetPos(c.Pos)}})
			i++
		}
		if !funcs.Is(name, funcs.RendersText) || cores[c] {
			continue
		}
		if i == len(pipe.Cmds)-1 && !arg {
			// Kept in a variable or a condition: its placeholders land
			// where the variable is printed.
			continue
		}
		pipe.Cmds = slices.Insert(pipe.Cmds, i+1, &parse.CommandNode{NodeType: parse.NodeCommand, Pos: c.Pos,
			Args: []parse.Node{parse.NewIdentifier(resolveFunc).SetPos(c.Pos)}})
		i++
	}
}

// meter puts costFunc before the call of Helm's function name, command i
// of pipe: around each argument it is given, and before it in the pipe
// when a value is piped into it. It returns how many commands it
// inserted before the call.
func meter(pipe *parse.PipeNode, i int, name string) int {
	c := pipe.Cmds[i]
	for k := 1; k < len(c.Args); k++ {
		c.Args[k] = &parse.PipeNode{NodeType: parse.NodePipe, Pos: c.Pos, Cmds: []*parse.CommandNode{
			{NodeType: parse.NodeCommand, Pos: c.Pos, Args: []parse.Node{parse.NewIdentifier(costFunc).SetPos(c.Pos), str(name, c.Pos), c.Args[k]}},
		}}
	}
	pipe.Cmds = slices.Insert(pipe.Cmds, i+1, &parse.CommandNode{NodeType: parse.NodeCommand, Pos: c.Pos,
		Args: []parse.Node{parse.NewIdentifier(afterFunc).SetPos(c.Pos), str(name, c.Pos)}})
	if i == 0 {
		return 0
	}
	pipe.Cmds = slices.Insert(pipe.Cmds, i, &parse.CommandNode{NodeType: parse.NodeCommand, Pos: c.Pos,
		Args: []parse.Node{parse.NewIdentifier(costFunc).SetPos(c.Pos), str(name, c.Pos)}})
	return 1
}

func str(s string, pos parse.Pos) *parse.StringNode {
	return &parse.StringNode{NodeType: parse.NodeString, Pos: pos, Quoted: strconv.Quote(s), Text: s}
}

// writer writes rewritten templates back as text, keeping lines: line is
// the output's current line, and an action that started on a later line
// of src starts with the newlines that bring it there (whitespace inside
// the delimiters, which prints nothing).
type writer struct {
	strings.Builder
	src  string
	line int
}

func (w *writer) WriteString(s string) {
	w.line += strings.Count(s, "\n")
	w.Builder.WriteString(s)
}

// open writes "{{" and the newlines that bring the output to the line of
// pos in src, then keyword ("if", "range" ...; "" for an action) and the
// spaces that bring what follows it to the column of pos in src, where
// the output is not already past it: Helm's errors (required, fail, a
// nil pointer) name the line and column of the chart's text, and the
// rewrite drops the spaces that "{{-" trims before the action.
func (w *writer) open(pos parse.Pos, keyword string) {
	w.Builder.WriteString("{{")
	if int(pos) > len(w.src) {
		w.Builder.WriteString(keyword)
		return
	}
	if want := 1 + strings.Count(w.src[:pos], "\n"); want > w.line {
		w.WriteString(strings.Repeat("\n", want-w.line))
	}
	if keyword != "" {
		keyword += " "
	}
	out := w.Builder.String()
	col := len(out) - strings.LastIndexByte(out, '\n') - 1
	want := int(pos) - strings.LastIndexByte(w.src[:pos], '\n') - 1
	if pad := want - col - len(keyword); pad > 0 {
		w.Builder.WriteString(strings.Repeat(" ", pad))
	}
	w.Builder.WriteString(keyword)
}

func (w *writer) list(l *parse.ListNode) {
	if l == nil {
		return
	}
	for _, n := range l.Nodes {
		w.node(n)
	}
}

func (w *writer) branch(keyword string, pos parse.Pos, pipe *parse.PipeNode, list, elseList *parse.ListNode) {
	w.open(pos, keyword)
	w.WriteString(pipe.String() + "}}")
	w.list(list)
	if elseList != nil {
		w.WriteString("{{else}}")
		w.list(elseList)
	}
	w.WriteString("{{end}}")
}

func (w *writer) node(n parse.Node) {
	switch n := n.(type) {
	case *parse.TextNode:
		text := string(n.Text)
		if strings.HasSuffix(text, "{") {
			// The "{{" that follows would read as "{" and a delimiter
			// ("{{{"): the brace is printed by an action of its own.
			text = text[:len(text)-1] + `{{"{"}}`
		}
		w.WriteString(text)
	case *parse.ActionNode:
		w.open(n.Pos, "")
		w.WriteString(n.Pipe.String() + "}}")
	case *parse.IfNode:
		w.branch("if", n.Pos, n.Pipe, n.List, n.ElseList)
	case *parse.RangeNode:
		w.branch("range", n.Pos, n.Pipe, n.List, n.ElseList)
	case *parse.WithNode:
		w.branch("with", n.Pos, n.Pipe, n.List, n.ElseList)
	case *parse.TemplateNode:
		w.open(n.Pos, "template")
		w.WriteString(strconv.Quote(n.Name))
		if n.Pipe != nil {
			w.WriteString(" " + n.Pipe.String())
		}
		w.WriteString("}}")
	case *parse.BreakNode:
		w.WriteString("{{break}}")
	case *parse.ContinueNode:
		w.WriteString("{{continue}}")
	case *parse.ListNode:
		w.list(n)
	case *parse.CommentNode, nil:
	default:
		panic(fmt.Sprintf("chart rewrite: unexpected node %T", n))
	}
}
