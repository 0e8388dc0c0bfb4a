package engine

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"

	yamlv3 "go.yaml.in/yaml/v3"

	"stencil.dev/stencil/templates/view"
)

// errSlowPath sends a document to the text path: placeholders replaced in
// the text, which is then decoded by sigs.k8s.io/yaml.
var errSlowPath = errors.New("decode through the text path")

// Decode turns one rendered document into the value it stands for,
// with every placeholder replaced by its value.
//
// The fast path reads the yaml.v3 tree it parsed to find the placeholders
// and builds the value from it, resolving plain scalars by the rules of
// sigs.k8s.io/yaml (go-yaml v2, YAML 1.1: NO is false, 0755 is 493), the
// decoder stencil has always used, so that what an author wrote literally
// keeps its meaning. One parse, not two: within the render budget. Whatever
// it is not sure to read as that decoder would (tags, merge keys,
// timestamps, duplicate keys, non-string keys, a parse error) goes through
// the text path, which is that decoder.
func Decode(body []byte, st *State) (any, error) {
	v, err := decodeFast(body, st)
	switch {
	case err == nil:
		if st.checkDecode {
			slow, serr := decodeSlow(body, st)
			if serr != nil || !reflect.DeepEqual(v, slow) {
				return nil, fmt.Errorf("fast path %#v differs from the text path %#v (%v)", v, slow, serr)
			}
		}
		return v, nil
	case errors.Is(err, errSlowPath):
		return decodeSlow(body, st)
	}
	return nil, err
}

func decodeSlow(body []byte, st *State) (any, error) {
	text, err := place(body, st)
	if err != nil {
		return nil, err
	}
	return DecodeYAML(text)
}

func decodeFast(body []byte, st *State) (any, error) {
	var root yamlv3.Node
	if err := yamlv3.Unmarshal(body, &root); err != nil {
		return nil, errSlowPath
	}
	if len(root.Content) == 0 {
		return nil, nil
	}
	return convert(root.Content[0], st, 0)
}

func convert(n *yamlv3.Node, st *State, depth int) (any, error) {
	if depth > 10000 {
		return nil, errSlowPath
	}
	if n.Style&yamlv3.TaggedStyle != 0 || n.Anchor != "" && n.Kind != yamlv3.ScalarNode && depth == 0 {
		return nil, errSlowPath
	}
	switch n.Kind {
	case yamlv3.AliasNode:
		return convert(n.Alias, st, depth+1)
	case yamlv3.SequenceNode:
		out := make([]any, len(n.Content))
		for i, c := range n.Content {
			v, err := convert(c, st, depth+1)
			if err != nil {
				return nil, err
			}
			out[i] = v
		}
		return out, nil
	case yamlv3.MappingNode:
		out := make(map[string]any, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, err := key(n.Content[i], st)
			if err != nil {
				return nil, err
			}
			if _, dup := out[k]; dup {
				return nil, errSlowPath // the text path words the error
			}
			v, err := convert(n.Content[i+1], st, depth+1)
			if err != nil {
				return nil, err
			}
			out[k] = v
		}
		return out, nil
	case yamlv3.ScalarNode:
		if strings.Contains(n.Value, st.mark) {
			return placedValue(n, false, st)
		}
		if n.Style&(yamlv3.DoubleQuotedStyle|yamlv3.SingleQuotedStyle|yamlv3.LiteralStyle|yamlv3.FoldedStyle) != 0 {
			return n.Value, nil
		}
		return resolvePlain(n.Value)
	}
	return nil, errSlowPath
}

// key is a mapping key as a string; only string keys take the fast path.
func key(n *yamlv3.Node, st *State) (string, error) {
	if n.Kind != yamlv3.ScalarNode || n.Style&yamlv3.TaggedStyle != 0 {
		return "", errSlowPath
	}
	if strings.Contains(n.Value, st.mark) {
		v, err := placedValue(n, true, st)
		if err != nil {
			return "", err
		}
		return v.(string), nil
	}
	if n.Style&(yamlv3.DoubleQuotedStyle|yamlv3.SingleQuotedStyle|yamlv3.LiteralStyle|yamlv3.FoldedStyle) != 0 {
		return n.Value, nil
	}
	v, err := resolvePlain(n.Value)
	if err != nil {
		return "", err
	}
	s, ok := v.(string)
	if !ok || s == "<<" {
		return "", errSlowPath // a number, boolean or null key, or a merge
	}
	return s, nil
}

// placedValue is the value of a scalar that holds placeholders: what the
// text path's replacement decodes to.
func placedValue(n *yamlv3.Node, isKey bool, st *State) (any, error) {
	plain := n.Style&(yamlv3.DoubleQuotedStyle|yamlv3.SingleQuotedStyle|yamlv3.LiteralStyle|yamlv3.FoldedStyle|yamlv3.TaggedStyle) == 0
	block := n.Style&(yamlv3.LiteralStyle|yamlv3.FoldedStyle) != 0
	if m := tokenPattern.FindStringSubmatch(n.Value); m != nil && m[0] == n.Value {
		p, ok := st.lookup(m)
		if !ok {
			return nil, fmt.Errorf("placing a value: unknown placeholder %s", m[0])
		}
		switch {
		case plain && !isKey && p.kind == kindValue:
			return typedValue(p.v)
		case p.kind == kindQuoted || p.kind == kindYAMLQuoted:
			return p.v.(string), nil
		case !block:
			return p.text(), nil
		}
	}
	if block {
		// The chomping indicator is in the header, which the tree does
		// not keep: the text path reads it.
		return nil, errSlowPath
	}
	s, err := st.substitute(n.Value)
	if err != nil {
		return nil, err
	}
	if plain && strings.Contains(n.Value, "\n") {
		return nil, errSlowPath // the text path reports it
	}
	return s, nil
}

// typedValue is what typed(v) decodes to.
func typedValue(v any) (any, error) {
	switch v := v.(type) {
	case nil, string, bool:
		return v, nil
	case int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64:
		return resolvePlain(fmt.Sprint(v))
	case float32, float64:
		s := fmt.Sprint(v)
		if _, err := strconv.ParseFloat(s, 64); err != nil || strings.ContainsAny(s, "IN") {
			return s, nil
		}
		return resolvePlain(s)
	}
	return Printed(v), nil
}

// resolvePlain reads a plain scalar as go-yaml v2 does (YAML 1.1), then
// as sigs.k8s.io/yaml and stencil's JSON decoding turn that into an
// unstructured value (numbers int64 where whole, else float64).
func resolvePlain(s string) (any, error) {
	switch s {
	case "", "~", "null", "Null", "NULL":
		return nil, nil
	case "y", "Y", "yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON":
		return true, nil
	case "n", "N", "no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF":
		return false, nil
	case ".nan", ".NaN", ".NAN", ".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF", "-.inf", "-.Inf", "-.INF", "<<":
		return nil, errSlowPath
	}
	switch c := s[0]; {
	case c == '.':
		if f, err := strconv.ParseFloat(s, 64); err == nil {
			return jsonNumber(f)
		}
		return s, nil
	case c == '+' || c == '-' || c >= '0' && c <= '9':
		if looksLikeTimestamp(s) {
			return nil, errSlowPath
		}
		plain := strings.ReplaceAll(s, "_", "")
		if i, err := strconv.ParseInt(plain, 0, 64); err == nil {
			return i, nil
		}
		if u, err := strconv.ParseUint(plain, 0, 64); err == nil {
			return view.CopyJSONValue(u)
		}
		if yamlStyleFloat(plain) {
			if f, err := strconv.ParseFloat(plain, 64); err == nil {
				return jsonNumber(f)
			}
		}
		if strings.HasPrefix(plain, "0b") || strings.HasPrefix(plain, "-0b") {
			return nil, errSlowPath
		}
	}
	return s, nil
}

// jsonNumber is f after a round trip through JSON: whole numbers become
// int64.
func jsonNumber(f float64) (any, error) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return nil, errSlowPath
	}
	b, err := json.Marshal(f)
	if err != nil {
		return nil, errSlowPath
	}
	return view.CopyJSONValue(json.Number(b))
}

// looksLikeTimestamp is go-yaml v2's quick check for a timestamp: four
// digits and a dash.
func looksLikeTimestamp(s string) bool {
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	return i == 4 && i < len(s) && s[i] == '-'
}

// yamlStyleFloat matches ^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$
// (go-yaml v2's float syntax) without a regular expression.
func yamlStyleFloat(s string) bool {
	i := 0
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		i++
	}
	digits := func() int {
		start := i
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		return i - start
	}
	if i < len(s) && s[i] == '.' {
		i++
		if digits() == 0 {
			return false
		}
	} else {
		if digits() == 0 {
			return false
		}
		if i < len(s) && s[i] == '.' {
			i++
			digits()
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		if digits() == 0 {
			return false
		}
	}
	return i == len(s)
}
