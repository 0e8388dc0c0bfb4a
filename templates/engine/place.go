package engine

// The text path of structure-safe rendering (see safe.go and decode.go):
// each scalar that holds placeholders is replaced, in the rendered text, by
// one JSON scalar with its value, and the text is then decoded as it always
// was. decode.go takes it for what its one-parse path is not sure of.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	yamlv3 "go.yaml.in/yaml/v3"
)

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
func place(body []byte, st *State) ([]byte, error) {
	if !bytes.Contains(body, []byte(st.mark)) {
		return body, nil
	}
	var root yamlv3.Node
	if err := yamlv3.Unmarshal(body, &root); err != nil {
		// The author's own structure is broken (the placeholders are plain
		// words): report it as the decoder that reads the result would.
		if _, derr := DecodeYAML(body); derr != nil {
			return nil, derr
		}
		return nil, notYAML(err)
	}
	lines := lineStarts(body)
	cur := &cursor{}
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
			if !strings.Contains(n.Value, st.mark) {
				return
			}
			sp, err := scalarSpan(body, lines, cur, n, key, st)
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

// cursor is where the last offset call ended: the scalars of a document
// come in order, so each walk of a line's characters goes on from the
// last one instead of from the line's start, and a line of 60,000 values
// (toJson of a tenant's list) costs its length once, not once per value.
type cursor struct{ line, col, at int }

// offset turns a yaml.v3 position (1-based line, 1-based column in
// characters) into a byte offset.
func offset(body []byte, lines []int, cur *cursor, line, col int) int {
	if line < 1 || line > len(lines) {
		return len(body)
	}
	at, c := lines[line-1], 1
	if cur.line == line && cur.col <= col && cur.col > 0 {
		at, c = cur.at, cur.col
	}
	for ; c < col && at < len(body) && body[at] != '\n'; c++ {
		_, size := utf8.DecodeRune(body[at:])
		at += size
	}
	*cur = cursor{line: line, col: c, at: at}
	return at
}

// lineEnd is the offset of the newline that ends line (1-based), or the
// body's end.
func lineEnd(body []byte, lines []int, line int) int {
	if line >= 1 && line < len(lines) {
		return lines[line] - 1
	}
	return len(body)
}

// scalarSpan finds where n stands in body and what replaces it.
func scalarSpan(body []byte, lines []int, cur *cursor, n *yamlv3.Node, key bool, st *State) (span, error) {
	from := offset(body, lines, cur, n.Line, n.Column)
	lineEnd := max(lineEnd(body, lines, n.Line), from)
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
func firstLoc(s string, st *State, err error) error {
	if m := tokenPattern.FindStringSubmatch(s); m != nil {
		if p, ok := st.lookup(m); ok && p.loc != "" {
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
func replacement(src []byte, n *yamlv3.Node, key bool, st *State) ([]byte, error) {
	plain := n.Style&(yamlv3.DoubleQuotedStyle|yamlv3.SingleQuotedStyle|yamlv3.LiteralStyle|yamlv3.FoldedStyle|yamlv3.TaggedStyle) == 0
	if m := tokenPattern.FindStringSubmatch(n.Value); m != nil && m[0] == n.Value {
		p, ok := st.lookup(m)
		if !ok {
			return nil, fmt.Errorf("placing a value: unknown placeholder %s", m[0])
		}
		switch {
		case plain && !key && p.kind == kindValue:
			return typed(p.v)
		case p.kind == kindQuoted || p.kind == kindYAMLQuoted:
			return marshalJSON(p.v.(string))
		}
		if n.Style&(yamlv3.LiteralStyle|yamlv3.FoldedStyle) == 0 {
			return marshalJSON(p.text())
		}
	}
	s, err := st.substitute(n.Value)
	if err != nil {
		return nil, err
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
	return marshalJSON(Printed(v))
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
