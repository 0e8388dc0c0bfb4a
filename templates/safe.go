package templates

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"text/template"
	"text/template/parse"
	"unicode/utf8"

	yamlv3 "go.yaml.in/yaml/v3"
)

// Structure-safe rendering. Templates are text/template, but a value an
// action prints never becomes YAML syntax, in the way html/template keeps
// data from becoming HTML:
//
//  1. At load, every printing action is rewritten (rewriteTree) to end in
//     the internal function valueFunc, which records the value and prints a
//     placeholder token instead: a word of letters and digits that is a
//     plain scalar in any YAML position. Trailing indent, nindent, quote
//     and squote stay after it: they lay the placeholder out where the
//     author meant the value to go.
//  2. The output, whose YAML structure is now only the author's, is split
//     into documents and parsed (go.yaml.in/yaml/v3, for positions).
//  3. Each scalar that holds a placeholder is replaced, in the text, by one
//     JSON scalar with the final value (place): a whole plain scalar gets
//     the value with its type (a string stays a string, a number a number);
//     anything else (text around it, quotes, a block scalar) a string.
//     Placeholders in comments vanish with them.
//  4. The text is decoded as before (sigs.k8s.io/yaml), so what the author
//     wrote literally is typed exactly as it always was.
//
// toYaml, toJson and include print structure on purpose. When one ends a
// printing action they stay structure (structuralFuncs): toYaml and toJson
// serialise the data with every string replaced by a quoted placeholder, so
// the shape of the data is kept but no string can carry syntax; include
// runs the named template with the same placeholders. Anywhere else (an
// argument, a variable, before sha256sum) they return plain text, which is
// then one value like any other.

// tokenPrefix starts every placeholder. A token is tokenPrefix, a kind
// byte, eight digits and tokenSuffix.
const (
	tokenPrefix = "zzstencilv"
	tokenSuffix = "z"
	// kindValue is a value printed by an action.
	kindValue = 'v'
	// kindQuoted is a string inside toYaml or toJson output, where it
	// stands between double quotes.
	kindQuoted = 'q'
)

var tokenPattern = regexp.MustCompile(tokenPrefix + `([vq])(\d{8})` + tokenSuffix)

// Internal function names the rewritten templates call.
const (
	valueFunc      = "__stencil_value"
	includeStruct  = "__stencil_include"
	toYAMLStruct   = "__stencil_toYaml"
	toJSONStruct   = "__stencil_toJson"
	maxIncludeNest = 100
	// maxImplicitKey is a safe bound under YAML's 1024-character limit.
	maxImplicitKey = 1000
)

// structuralFuncs are the functions whose output stays structure when they
// end a printing action, with the internal function that keeps it safe.
// The JSON variants all serialise compactly here: the data is the same.
var structuralFuncs = map[string]string{
	"include": includeStruct, "toYaml": toYAMLStruct,
	"toJson": toJSONStruct, "toRawJson": toJSONStruct, "toPrettyJson": toJSONStruct,
	"mustToJson": toJSONStruct, "mustToRawJson": toJSONStruct, "mustToPrettyJson": toJSONStruct,
}

// placed is one value recorded during an execution.
type placed struct {
	v    any
	kind byte
	// loc is "file:line" of the action that printed it.
	loc string
}

// execState is what one execution records; an executor owns one.
type execState struct {
	vals  []placed
	depth int
	// size sums the length of the strings recorded: with the output, it
	// is bounded by MaxOutputBytes.
	size int
}

func (st *execState) token(kind byte, v any, loc string) string {
	if s, ok := v.(string); ok {
		st.size += len(s)
	}
	st.vals = append(st.vals, placed{v: v, kind: kind, loc: loc})
	return fmt.Sprintf("%s%c%08d%s", tokenPrefix, kind, len(st.vals)-1, tokenSuffix)
}

// lookup returns the value behind a token match (the submatch indexes of
// tokenPattern).
func (st *execState) lookup(idx string) (placed, bool) {
	i, err := strconv.Atoi(idx)
	if err != nil || i < 0 || i >= len(st.vals) {
		return placed{}, false
	}
	return st.vals[i], true
}

// text is how a value reads inside a larger string, as text/template
// prints it.
func (p placed) text() string {
	if p.kind == kindQuoted {
		// It stood between the double quotes of serialised data: keep it
		// escaped, so that the data still reads as JSON or YAML.
		b, _ := jsonString(p.v.(string))
		return string(b[1 : len(b)-1])
	}
	return printed(p.v)
}

// printed is a value as text/template prints it.
func printed(v any) string {
	if v == nil {
		return "<no value>"
	}
	return fmt.Sprint(v)
}

// bindFuncs gives the template t (a clone owned by one executor) the
// functions that record into st.
func bindFuncs(t *template.Template, st *execState) {
	t.Funcs(template.FuncMap{
		valueFunc: func(loc string, v any) (string, error) {
			if err := scalar(v); err != nil {
				return "", err
			}
			tok := st.token(kindValue, v, loc)
			if st.size > MaxOutputBytes {
				return "", errOutputTooLarge
			}
			return tok, nil
		},
		includeStruct: func(name string, data any) (string, error) {
			return include(t, st, name, data)
		},
		"include": func(name string, data any) (string, error) {
			out, err := include(t, st, name, data)
			if err != nil {
				return "", err
			}
			return resolve(out, st), nil
		},
		toYAMLStruct: func(v any) (string, error) {
			out, err := toYAML(quoteStrings(v, st))
			if err != nil {
				return "", err
			}
			// The placeholders are plain words; quote them so that each
			// stands as a string wherever the serialised data lands.
			return tokenPattern.ReplaceAllString(out, `"$0"`), nil
		},
		toJSONStruct: func(v any) (string, error) {
			return toJSON(quoteStrings(v, st))
		},
	})
}

// scalar refuses a value that cannot be printed as one YAML scalar.
func scalar(v any) error {
	if v == nil {
		return nil
	}
	switch reflect.ValueOf(v).Kind() {
	case reflect.Map, reflect.Slice, reflect.Array, reflect.Struct:
		return fmt.Errorf("prints %s where one value stands; print structure with toYaml or toJson", describe(v))
	}
	return nil
}

// include runs the named template into a bounded buffer with st's
// placeholders.
func include(t *template.Template, st *execState, name string, data any) (string, error) {
	if st.depth >= maxIncludeNest {
		return "", fmt.Errorf("include %q: nested more than %d deep (a template that includes itself?)", name, maxIncludeNest)
	}
	st.depth++
	defer func() { st.depth-- }()
	w := &limitedBuffer{max: MaxOutputBytes}
	if err := t.ExecuteTemplate(w, name, data); err != nil {
		return "", err
	}
	return w.buf.String(), nil
}

// resolve replaces every placeholder in s by the text of its value: what
// include returns where its output is used as a value, not as structure.
func resolve(s string, st *execState) string {
	if !strings.Contains(s, tokenPrefix) {
		return s
	}
	return tokenPattern.ReplaceAllStringFunc(s, func(tok string) string {
		m := tokenPattern.FindStringSubmatch(tok)
		if p, ok := st.lookup(m[2]); ok {
			return p.text()
		}
		return tok
	})
}

// quoteStrings copies v with every string, keys included, replaced by a
// kindQuoted placeholder.
func quoteStrings(v any, st *execState) any {
	switch v := v.(type) {
	case string:
		return st.token(kindQuoted, v, "")
	case map[string]any:
		out := make(map[string]any, len(v))
		// Sorted, so the placeholders number in the order of the keys.
		for _, k := range slices.Sorted(mapKeys(v)) {
			out[st.token(kindQuoted, k, "")] = quoteStrings(v[k], st)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = quoteStrings(e, st)
		}
		return out
	case map[string]string:
		m := make(map[string]any, len(v))
		for k, e := range v {
			m[k] = e
		}
		return quoteStrings(m, st)
	case []string:
		l := make([]any, len(v))
		for i, e := range v {
			l[i] = e
		}
		return quoteStrings(l, st)
	}
	return v
}

func mapKeys(m map[string]any) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

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

// placeError is a value that cannot stand where its action printed it.
func placeError(loc string, err error) error {
	file, line := loc, 0
	if i := strings.LastIndexByte(loc, ':'); i > 0 {
		if n, convErr := strconv.Atoi(loc[i+1:]); convErr == nil {
			file, line = loc[:i], n
		}
	}
	return &RenderError{Template: file, Line: line, Err: err}
}

// span is a replacement of body[start:end].
type span struct {
	start, end int
	text       []byte
}

// place replaces every placeholder in one rendered document by its value,
// each scalar holding placeholders by one JSON scalar (see the top of this
// file). A document without placeholders is returned as it is.
func place(body []byte, st *execState) ([]byte, error) {
	if !bytes.Contains(body, []byte(tokenPrefix)) {
		return body, nil
	}
	var root yamlv3.Node
	if err := yamlv3.Unmarshal(body, &root); err != nil {
		// The author's own structure is broken (the placeholders are plain
		// words): report it as the decoder that reads the result would.
		if _, derr := decodeYAML(body); derr != nil {
			return nil, derr
		}
		return nil, notYAML(err)
	}
	lines := lineStarts(body)
	var (
		spans []span
		errs  []error
	)
	var walk func(n *yamlv3.Node, key bool)
	walk = func(n *yamlv3.Node, key bool) {
		switch n.Kind {
		case yamlv3.DocumentNode, yamlv3.SequenceNode:
			for _, c := range n.Content {
				walk(c, false)
			}
		case yamlv3.MappingNode:
			for i, c := range n.Content {
				walk(c, i%2 == 0)
			}
		case yamlv3.ScalarNode:
			if !strings.Contains(n.Value, tokenPrefix) {
				return
			}
			sp, err := scalarSpan(body, lines, n, key, st)
			if err != nil {
				errs = append(errs, err)
				return
			}
			spans = append(spans, sp)
		}
	}
	walk(&root, false)
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	slices.SortFunc(spans, func(a, b span) int { return a.start - b.start })
	var out bytes.Buffer
	out.Grow(len(body))
	at := 0
	for _, sp := range spans {
		if sp.start < at {
			return nil, errors.New("placing values: overlapping scalars")
		}
		out.Write(body[at:sp.start])
		out.Write(sp.text)
		at = sp.end
	}
	out.Write(body[at:])
	return out.Bytes(), nil
}

func lineStarts(b []byte) []int {
	starts := []int{0}
	for i, c := range b {
		if c == '\n' {
			starts = append(starts, i+1)
		}
	}
	return starts
}

// offset turns a yaml.v3 position (1-based line, 1-based column in
// characters) into a byte offset.
func offset(body []byte, lines []int, line, col int) int {
	if line < 1 || line > len(lines) {
		return len(body)
	}
	at := lines[line-1]
	for c := 1; c < col && at < len(body) && body[at] != '\n'; c++ {
		_, size := utf8.DecodeRune(body[at:])
		at += size
	}
	return at
}

// scalarSpan finds where n stands in body and what replaces it.
func scalarSpan(body []byte, lines []int, n *yamlv3.Node, key bool, st *execState) (span, error) {
	from := offset(body, lines, n.Line, n.Column)
	lineEnd := len(body)
	if i := bytes.IndexByte(body[from:], '\n'); i >= 0 {
		lineEnd = from + i
	}
	// A tag or an anchor may stand before the scalar itself.
	find := func(c byte) (int, error) {
		i := bytes.IndexByte(body[from:lineEnd], c)
		if i < 0 {
			return 0, fmt.Errorf("placing a value at line %d: cannot find the scalar", n.Line)
		}
		return from + i, nil
	}
	var (
		start, end int
		err        error
	)
	switch {
	case n.Style&yamlv3.DoubleQuotedStyle != 0:
		if start, err = find('"'); err == nil {
			end, err = quotedEnd(body, start, '"')
		}
	case n.Style&yamlv3.SingleQuotedStyle != 0:
		if start, err = find('\''); err == nil {
			end, err = quotedEnd(body, start, '\'')
		}
	case n.Style&(yamlv3.LiteralStyle|yamlv3.FoldedStyle) != 0:
		c := byte('|')
		if n.Style&yamlv3.FoldedStyle != 0 {
			c = '>'
		}
		if start, err = find(c); err == nil {
			end = blockEnd(body, start)
		}
	default:
		i := bytes.Index(body[from:lineEnd], []byte(n.Value))
		if i < 0 {
			return span{}, firstLoc(n.Value, st, fmt.Errorf("the value is inside a plain scalar that spans lines; quote the scalar"))
		}
		start, end = from+i, from+i+len(n.Value)
	}
	if err != nil {
		return span{}, err
	}
	text, err := replacement(body[start:end], n, key, st)
	if err != nil {
		return span{}, err
	}
	if key && len(text) > maxImplicitKey {
		// YAML allows an implicit key of at most 1024 characters: a longer
		// one becomes an explicit key, "? KEY" with its ": " on the next
		// line at the key's column.
		lineStart := bytes.LastIndexByte(body[:start], '\n') + 1
		col := utf8.RuneCount(body[lineStart:start])
		text = slices.Concat([]byte("? "), text, []byte("\n"), bytes.Repeat([]byte(" "), col))
	}
	return span{start: start, end: end, text: text}, nil
}

// firstLoc names the action of the first placeholder in s in err.
func firstLoc(s string, st *execState, err error) error {
	if m := tokenPattern.FindStringSubmatch(s); m != nil {
		if p, ok := st.lookup(m[2]); ok && p.loc != "" {
			return placeError(p.loc, err)
		}
	}
	return err
}

// quotedEnd returns the offset just past the quote that closes the quoted
// scalar starting at start.
func quotedEnd(body []byte, start int, q byte) (int, error) {
	for i := start + 1; i < len(body); i++ {
		switch body[i] {
		case '\\':
			if q == '"' {
				i++
			}
		case q:
			if q == '\'' && i+1 < len(body) && body[i+1] == '\'' {
				i++
				continue
			}
			return i + 1, nil
		}
	}
	return 0, errors.New("placing a value: unterminated quoted scalar")
}

// blockEnd returns the offset of the end of the last content line of the
// block scalar whose indicator is at start: the content is the lines after
// it that are blank or indented at least as much as its first non-blank line.
func blockEnd(body []byte, start int) int {
	nl := bytes.IndexByte(body[start:], '\n')
	if nl < 0 {
		return len(body)
	}
	end := start + nl
	indent := -1
	for at := start + nl + 1; at < len(body); {
		next := bytes.IndexByte(body[at:], '\n')
		lineEnd := len(body)
		if next >= 0 {
			lineEnd = at + next
		}
		line := body[at:lineEnd]
		if len(bytes.TrimLeft(line, " ")) > 0 && len(bytes.TrimSpace(line)) > 0 {
			ind := len(line) - len(bytes.TrimLeft(line, " "))
			if indent < 0 {
				indent = ind
			}
			if ind < indent {
				break
			}
			end = lineEnd
		}
		if next < 0 {
			break
		}
		at = lineEnd + 1
	}
	return end
}

// replacement is the JSON scalar that takes the place of src, the source of
// scalar n.
func replacement(src []byte, n *yamlv3.Node, key bool, st *execState) ([]byte, error) {
	plain := n.Style&(yamlv3.DoubleQuotedStyle|yamlv3.SingleQuotedStyle|yamlv3.LiteralStyle|yamlv3.FoldedStyle|yamlv3.TaggedStyle) == 0
	if m := tokenPattern.FindStringSubmatch(n.Value); m != nil && m[0] == n.Value {
		p, ok := st.lookup(m[2])
		if !ok {
			return nil, fmt.Errorf("placing a value: unknown placeholder %s", m[0])
		}
		switch {
		case plain && !key && p.kind == kindValue:
			return typed(p.v)
		case p.kind == kindQuoted:
			return marshalJSON(p.v.(string))
		}
		if n.Style&(yamlv3.LiteralStyle|yamlv3.FoldedStyle) == 0 {
			return marshalJSON(p.text())
		}
	}
	var failed error
	s := tokenPattern.ReplaceAllStringFunc(n.Value, func(tok string) string {
		m := tokenPattern.FindStringSubmatch(tok)
		p, ok := st.lookup(m[2])
		if !ok {
			failed = fmt.Errorf("placing a value: unknown placeholder %s", tok)
			return tok
		}
		return p.text()
	})
	if failed != nil {
		return nil, failed
	}
	if n.Style&(yamlv3.LiteralStyle|yamlv3.FoldedStyle) != 0 {
		s = chomp(s, src)
	}
	return marshalJSON(s)
}

// chomp applies the block scalar's chomping indicator (in its header, src's
// first line) to s, now that the values are in: clip keeps one final line
// break, strip (-) none, keep (+) all.
func chomp(s string, src []byte) string {
	header := src
	if i := bytes.IndexByte(src, '\n'); i >= 0 {
		header = src[:i]
	}
	if i := bytes.IndexByte(header, '#'); i >= 0 {
		header = header[:i]
	}
	switch {
	case bytes.ContainsRune(header, '+'):
		return s
	case bytes.ContainsRune(header, '-'):
		return strings.TrimRight(s, "\n")
	}
	if t := strings.TrimRight(s, "\n"); t != s {
		return t + "\n"
	}
	return s
}

// typed is v as a YAML scalar of its own type: a string is a JSON string
// (never read as a number or a boolean), a number or a boolean is printed
// as text/template prints it, nil is null.
func typed(v any) ([]byte, error) {
	switch v := v.(type) {
	case nil:
		return []byte("null"), nil
	case string:
		return marshalJSON(v)
	case bool:
		return []byte(strconv.FormatBool(v)), nil
	case int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64:
		return []byte(fmt.Sprint(v)), nil
	case float32, float64:
		s := fmt.Sprint(v)
		if _, err := strconv.ParseFloat(s, 64); err != nil || strings.ContainsAny(s, "IN") {
			// NaN and infinities have no JSON form: a string.
			return marshalJSON(s)
		}
		return []byte(s), nil
	}
	return marshalJSON(printed(v))
}

// marshalJSON encodes s as a JSON string without HTML escaping, and with
// every character YAML does not allow unescaped (DEL, C1 controls, ...) as
// a \u escape: the result is a double-quoted scalar of both languages.
func marshalJSON(s string) ([]byte, error) {
	out, err := jsonString(s)
	if err != nil {
		return nil, err
	}
	if !slices.ContainsFunc([]rune(string(out)), notYAMLPrintable) {
		return out, nil
	}
	var e bytes.Buffer
	for _, r := range string(out) {
		if notYAMLPrintable(r) {
			fmt.Fprintf(&e, "\\u%04x", r)
			continue
		}
		e.WriteRune(r)
	}
	return e.Bytes(), nil
}

// jsonString encodes s as a JSON string without HTML escaping.
func jsonString(s string) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(s); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// notYAMLPrintable says whether YAML requires r to be escaped (NEL, a
// line break in YAML 1.1, included).
func notYAMLPrintable(r rune) bool {
	switch {
	case r == 0x09 || r == 0x0A || r == 0x0D || r >= 0x20 && r <= 0x7E:
		return false
	case r >= 0xA0 && r <= 0xD7FF || r >= 0xE000 && r <= 0xFFFD && r != 0xFEFF || r >= 0x10000 && r <= 0x10FFFF:
		return false
	}
	return true
}
