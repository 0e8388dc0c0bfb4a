package engine

import (
	"crypto/rand"
	"encoding/base32"
	"fmt"
	"maps"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"text/template"

	"stencil.dev/stencil/templates/budget"
	"stencil.dev/stencil/templates/funcs"
)

// Structure-safe rendering. Templates are text/template, but a value an
// action prints never becomes YAML syntax, in the way html/template keeps
// data from becoming HTML:
//
//  1. At load, every printing action is rewritten (Rewrite) to end in
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

// tokenPrefix starts every placeholder. A token is tokenPrefix, the
// render's secret (secretLen letters and digits drawn from crypto/rand
// when the render starts), a kind byte, eight digits and tokenSuffix. Only
// a token that carries the secret of the state that resolves it is a
// placeholder: a tenant's string shaped like one is text, since the
// tenant cannot know a secret drawn after its spec was written (and a
// value holding the secret is refused, see refuseForged).
const (
	tokenPrefix = "zzstencil"
	tokenSuffix = "z"
	secretLen   = 16
	// kindValue is a value printed by an action.
	kindValue = 'v'
	// kindQuoted is a string inside toYaml or toJson output, where it
	// stands between double quotes.
	kindQuoted = 'q'
	// kindYAMLQuoted is a tenant's string inside what one of a chart's
	// serialisers wrote, between double quotes (Placeholders).
	kindYAMLQuoted = 'y'
)

// tokenPattern matches a token of any secret; submatches: the secret, the
// kind, the index. lookup keeps only those of the state's own secret.
var tokenPattern = regexp.MustCompile(tokenPrefix + `([a-z2-7]{16})([vqy])(\d{8})` + tokenSuffix)

// Internal function names the rewritten templates call.
const (
	valueFunc     = "__stencil_value"
	includeStruct = "__stencil_include"
	toYAMLStruct  = "__stencil_toYaml"
	toJSONStruct  = "__stencil_toJson"
	// maxImplicitKey is a safe bound under YAML's 1024-character limit.
	maxImplicitKey = 1000
)

// structuralFuncs are the functions whose output stays structure when they
// end a printing action, with the internal function that keeps it safe:
// include, and the policy's serialisers of YAML and JSON that own
// templates have (the JSON ones all serialise compactly here: the data is
// the same).
var structuralFuncs = func() map[string]string {
	m := map[string]string{"include": includeStruct}
	hermetic := funcs.Hermetic()
	for _, name := range funcs.Named(funcs.Serialiser) {
		if _, ok := hermetic[name]; !ok {
			continue
		}
		switch {
		case funcs.Is(name, funcs.WritesYAML):
			m[name] = toYAMLStruct
		case funcs.Is(name, funcs.WritesJSON):
			m[name] = toJSONStruct
		}
	}
	return m
}()

// placed is one value recorded during an execution.
type placed struct {
	v    any
	kind byte
	// loc is "file:line" of the action that printed it.
	loc string
}

// State is what one execution records; an executor owns one.
type State struct {
	vals  []placed
	depth int
	// meter counts the render against its budget.
	meter budget.Meter
	// size sums the length of the strings recorded: with the output, it
	// is bounded by the budget's stringBytes (outputBound).
	size int
	// checkDecode decodes every document both ways (the fast path and the
	// text path) and fails on any difference: the tests run so.
	checkDecode bool
	// mark is tokenPrefix and this render's secret: what starts every
	// placeholder of this render, and nothing else.
	mark string
	// helmTexts are what Helm's own functions wrote where chart mode's
	// wrote placeholders (RecordHelmText), by the first token of what
	// chart mode wrote.
	helmTexts map[string][]helmText
	// layOut resolves placeholders inside larger scalars as chart mode
	// lays them out (LayOut).
	layOut bool
}

// helmText is one text a chart's serialiser or layout wrote with
// placeholders (placed), and what Helm's function wrote from the real
// values (helm); at is the offset of placed's first token in it.
type helmText struct {
	placed, helm string
	at           int
}

// NewState returns the state of one executor, whose renders are bounded
// by limits; with checkDecode, every document is decoded both ways and a
// difference fails the render (see Decode).
func NewState(limits budget.Limits, checkDecode bool) State {
	return State{meter: budget.NewMeter(limits), checkDecode: checkDecode, mark: newMark()}
}

// newMark draws a render's secret: 80 bits from crypto/rand, in base32's
// lower-case letters and digits (a plain YAML word in any position).
func newMark() string {
	var b [secretLen * 5 / 8]byte
	rand.Read(b[:]) // never fails (crypto/rand's contract since Go 1.24)
	return tokenPrefix + strings.ToLower(base32.StdEncoding.EncodeToString(b[:]))
}

// Mark is what starts every placeholder of the current render: text
// that holds it holds placeholders (or a forgery, refused).
func (st *State) Mark() string { return st.mark }

// refuseForged fails when s, a value a render is about to record, holds
// the render's secret: only the render's own placeholders do, and a
// value is never one.
func (st *State) refuseForged(s string) error {
	if strings.Contains(s, st.mark) {
		return fmt.Errorf("a value holds this render's placeholder secret, which no value can know: refused")
	}
	return nil
}

// Steps returns the steps the current render has counted against its
// budget so far.
func (st *State) Steps() int64 { return st.meter.Steps() }

// Reset readies the state for the next render, keeping its memory.
func (st *State) Reset() {
	clear(st.vals)
	clear(st.helmTexts)
	st.vals, st.depth, st.size = st.vals[:0], 0, 0
	st.meter.Reset()
	st.mark = newMark()
}

func (st *State) token(kind byte, v any, loc string) string {
	if s, ok := v.(string); ok {
		st.size += len(s)
	}
	st.vals = append(st.vals, placed{v: v, kind: kind, loc: loc})
	return fmt.Sprintf("%s%c%08d%s", st.mark, kind, len(st.vals)-1, tokenSuffix)
}

// lookup returns the value behind a token match (tokenPattern's
// submatches): only a token of this render's secret is one.
func (st *State) lookup(m []string) (placed, bool) {
	if m[1] != st.mark[len(tokenPrefix):] {
		return placed{}, false
	}
	i, err := strconv.Atoi(m[3])
	if err != nil || i < 0 || i >= len(st.vals) {
		return placed{}, false
	}
	return st.vals[i], true
}

// text is how a value reads inside a larger string, as text/template
// prints it.
func (p placed) text() string {
	if p.kind == kindYAMLQuoted {
		// Between the double quotes of YAML a chart's serialiser wrote:
		// escaped as JSON, and YAML's non-printables (NEL) too.
		b, _ := marshalJSON(p.v.(string))
		return string(b[1 : len(b)-1])
	}
	if p.kind == kindQuoted {
		// It stood between the double quotes of serialised data: keep it
		// escaped, so that the data still reads as JSON or YAML.
		b, _ := jsonString(p.v.(string))
		return string(b[1 : len(b)-1])
	}
	return Printed(p.v)
}

// Printed is a value as text/template prints it ("<no value>" for nil).
func Printed(v any) string {
	if v == nil {
		return "<no value>"
	}
	return fmt.Sprint(v)
}

// Bind gives the template t (a clone owned by one executor) the
// functions that record into st, and extra functions of the caller's,
// counted against the budget like every other.
func Bind(t *template.Template, st *State, budgeted bool, extra template.FuncMap) {
	fm := funcs.Hermetic()
	maps.Copy(fm, extra)
	if budgeted {
		t.Funcs(budget.Wrap(fm, &st.meter, nil))
	} else {
		t.Funcs(extra)
		limits := st.meter.Limits()
		limits.Steps, limits.StringBytes, limits.IncludeDepth, limits.TimeoutSeconds = 1<<62, 1<<62, 100, 0
		st.meter = budget.NewMeter(limits)
	}
	t.Funcs(template.FuncMap{
		valueFunc: func(loc string, v any) (string, error) {
			if err := scalar(v); err != nil {
				return "", err
			}
			if s, ok := v.(string); ok {
				if err := st.refuseForged(s); err != nil {
					return "", err
				}
			}
			// A printed value costs steps as its length, but is not held
			// to stringBytes: it is the tenant's data as stored (which the
			// API server bounds), not something a function built, and the
			// output bound covers it. A 1.5 MiB image is refused by etcd,
			// as ApplyFailed, not here (the bad-input scenario).
			n := int64(1)
			if s, ok := v.(string); ok {
				n += int64(len(s)) / 64
			}
			if err := st.meter.Charge(n); err != nil {
				return "", err
			}
			tok := st.token(kindValue, v, loc)
			if max := outputBound(st.meter.Limits()); st.size > max {
				return "", outputTooLarge(max)
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
			if err := st.meter.Measured("toYaml", v); err != nil {
				return "", err
			}
			out, err := funcs.ToYAML(quoteStrings(v, st))
			if err != nil {
				return "", err
			}
			// The placeholders are plain words; quote them so that each
			// stands as a string wherever the serialised data lands.
			return tokenPattern.ReplaceAllString(out, `"$0"`), nil
		},
		toJSONStruct: func(v any) (string, error) {
			if err := st.meter.Measured("toJson", v); err != nil {
				return "", err
			}
			return funcs.ToJSON(quoteStrings(v, st))
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
		return fmt.Errorf("prints %s where one value stands; print structure with toYaml or toJson", Describe(v))
	}
	return nil
}

// include runs the named template into a bounded buffer with st's
// placeholders.
func include(t *template.Template, st *State, name string, data any) (string, error) {
	if int64(st.depth) >= st.meter.Limits().IncludeDepth {
		return "", &budget.Error{Bound: "includeDepth", Limit: st.meter.Limits().IncludeDepth,
			What: fmt.Sprintf("include %q nested more than %d deep (a template that includes itself?)", name, st.meter.Limits().IncludeDepth)}
	}
	if err := st.meter.Charge(1); err != nil {
		return "", err
	}
	st.depth++
	defer func() { st.depth-- }()
	w := &limitedBuffer{max: outputBound(st.meter.Limits())}
	if err := t.ExecuteTemplate(w, name, data); err != nil {
		return "", err
	}
	return w.buf.String(), nil
}

// resolve replaces every placeholder in s by the text of its value: what
// include returns where its output is used as a value, not as structure.
func resolve(s string, st *State) string {
	out, _ := st.substitute(s) // a placeholder not of st stays as it is
	return out
}

// substitute replaces every placeholder in s by the text of its value; a
// placeholder st did not record is an error (and stays in the result).
func (st *State) substitute(s string) (string, error) {
	if !strings.Contains(s, st.mark) {
		return s, nil
	}
	if st.layOut {
		return st.resolveLaidOut(s)
	}
	var failed error
	out := tokenPattern.ReplaceAllStringFunc(s, func(tok string) string {
		m := tokenPattern.FindStringSubmatch(tok)
		if m[1] != st.mark[len(tokenPrefix):] {
			return tok // text shaped like a token of another render
		}
		p, ok := st.lookup(m)
		if !ok {
			failed = fmt.Errorf("placing a value: unknown placeholder %s", tok)
			return tok
		}
		return p.text()
	})
	return out, failed
}

// quoteStrings copies v with every string, keys included, replaced by a
// kindQuoted placeholder, numbered in the order of the keys.
func quoteStrings(v any, st *State) any {
	return mapStrings(v, func(s string) string { return st.token(kindQuoted, s, "") }, true)
}

// Place records v, printed by the action at loc ("file:line"), and
// returns the placeholder that stands for it until Decode puts it where
// it landed as exactly one YAML value: chart mode's printing actions
// call it for a value that would otherwise be read as YAML syntax.
func (st *State) Place(v any, loc string) (string, error) {
	tok := st.token(kindValue, v, loc)
	if max := outputBound(st.meter.Limits()); st.size > max {
		return "", outputTooLarge(max)
	}
	return tok, nil
}

// IsPlaceholder reports whether s is one of the render's placeholders and
// nothing else.
func (st *State) IsPlaceholder(s string) bool {
	m := tokenPattern.FindStringSubmatchIndex(s)
	return m != nil && m[0] == 0 && m[1] == len(s) && s[m[2]:m[3]] == st.mark[len(tokenPrefix):]
}

// Resolve replaces every placeholder in s by the text of its value: what a
// function is given when it takes rendered text as an argument.
func (st *State) Resolve(s string) string { return resolve(s, st) }

// Meter returns the meter of the current render, for what counts outside
// the wrapped functions (chart mode's printed bytes, Helm's own functions).
func (st *State) Meter() *budget.Meter { return &st.meter }

// Budgeted returns fm wrapped to count against st's render budget, as
// Bind wraps stencil's own (budget.Wrap, each function at its price in
// the policy table), plus the step function the rewrite calls; with a
// taint (chart mode), each also carries the taint of the text it is
// given, in the same wrapper.
func Budgeted(fm template.FuncMap, st *State, taint *Taint) template.FuncMap {
	if taint == nil {
		return budget.Wrap(fm, &st.meter, nil)
	}
	return budget.Wrap(fm, &st.meter, taint)
}

// RecordHelmText records that where a chart's serialiser (toYaml,
// toJson ...), or a layout of its output (indent, nindent), wrote placed,
// which holds placeholders, Helm would have written helm: the same
// function run on the real values. ResolveIndented gives a function that
// takes the text Helm's bytes (a sha256sum of an included ConfigMap is
// Helm's checksum), where the placeholders' own texts would differ in
// quoting, in YAML's choice of style and in line folding.
func (st *State) RecordHelmText(placed, helm string) error {
	loc := tokenPattern.FindStringSubmatchIndex(placed)
	if loc == nil || placed[loc[2]:loc[3]] != st.mark[len(tokenPrefix):] {
		return nil
	}
	if st.size += len(helm); st.size > outputBound(st.meter.Limits()) {
		return outputTooLarge(outputBound(st.meter.Limits()))
	}
	if st.helmTexts == nil {
		st.helmTexts = map[string][]helmText{}
	}
	tok := placed[loc[0]:loc[1]]
	st.helmTexts[tok] = append(st.helmTexts[tok], helmText{placed: placed, helm: helm, at: loc[0]})
	return nil
}

// withHelmTexts replaces in s each text RecordHelmText recorded by
// Helm's (the longest that matches where a token starts one).
func (st *State) withHelmTexts(s string) string {
	if len(st.helmTexts) == 0 {
		return s
	}
	var b strings.Builder
	last := 0
	for _, m := range tokenPattern.FindAllStringIndex(s, -1) {
		if m[0] < last {
			continue
		}
		var best *helmText
		for i, t := range st.helmTexts[s[m[0]:m[1]]] {
			start := m[0] - t.at
			if start >= last && strings.HasPrefix(s[start:], t.placed) && (best == nil || len(t.placed) > len(best.placed)) {
				best = &st.helmTexts[s[m[0]:m[1]]][i]
			}
		}
		if best == nil {
			continue
		}
		start := m[0] - best.at
		b.WriteString(s[last:start])
		b.WriteString(best.helm)
		last = start + len(best.placed)
	}
	if last == 0 {
		return s
	}
	b.WriteString(s[last:])
	return b.String()
}

// ResolveIndented is Resolve for chart mode, where indent, nindent and
// quote lay out the placeholder rather than the value: a placeholder that
// stands after only spaces on its line gets each further line of its
// value indented the same, and one between double quotes is quoted as
// quote quotes (Go's %q), which is what they did to the value in Helm.
// What a serialiser wrote is first given Helm's text (RecordHelmText).
func (st *State) ResolveIndented(s string) string {
	out, _ := st.resolveLaidOut(s) // a placeholder not of st stays as it is
	return out
}

// LayOut makes a placeholder that lands inside a larger scalar read as
// ResolveIndented resolves it, as chart mode's layouts need: Helm's text
// there, quoted where quote quoted it and indented where indent and
// nindent indented it. Own templates place values without layouts.
func (st *State) LayOut() { st.layOut = true }

// resolveLaidOut is ResolveIndented; a placeholder of st it did not
// record is an error (and stays in the result).
func (st *State) resolveLaidOut(s string) (string, error) {
	if !strings.Contains(s, st.mark) {
		return s, nil
	}
	if s = st.withHelmTexts(s); !strings.Contains(s, st.mark) {
		return s, nil
	}
	var b strings.Builder
	var failed error
	last := 0
	for _, m := range tokenPattern.FindAllStringSubmatchIndex(s, -1) {
		p, ok := st.lookup([]string{s[m[0]:m[1]], s[m[2]:m[3]], s[m[4]:m[5]], s[m[6]:m[7]]})
		if !ok {
			if s[m[2]:m[3]] == st.mark[len(tokenPrefix):] {
				failed = fmt.Errorf("placing a value: unknown placeholder %s", s[m[0]:m[1]])
			}
			continue
		}
		text := p.text()
		start, end := m[0], m[1]
		lineStart := strings.LastIndexByte(s[:start], '\n') + 1
		switch {
		case p.kind == kindValue && start > 0 && end < len(s) && s[start-1] == '"' && s[end] == '"':
			// quote laid out the placeholder: it quotes the value.
			text, start, end = fmt.Sprintf("%q", text), start-1, end+1
		case s[lineStart:start] != "" && strings.Trim(s[lineStart:start], " ") == "":
			text = strings.ReplaceAll(text, "\n", "\n"+s[lineStart:start])
		}
		if start < last {
			continue
		}
		b.WriteString(s[last:start])
		b.WriteString(text)
		last = end
	}
	b.WriteString(s[last:])
	return b.String(), failed
}
