package crd

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"strconv"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// FromJSONSchema translates a chart's values.schema.json (JSON Schema,
// draft 4 to 2020-12) into a structural OpenAPI v3 schema: $ref within
// the file is inlined; what a CRD cannot express (e.g. oneOf of different
// types, patternProperties, $ref to another file) is left out and named
// in dropped, one line each with its JSON path.
func FromJSONSchema(doc []byte) (props *apiextensionsv1.JSONSchemaProps, dropped []string, err error) {
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	var root map[string]any
	if err := dec.Decode(&root); err != nil {
		return nil, nil, fmt.Errorf("values.schema.json: %w", err)
	}
	tr := &translator{root: root, refs: []string{"#"}, memo: map[string]memoised{}}
	s := tr.schema(root, "#")
	if tr.err != nil {
		return nil, nil, fmt.Errorf("values.schema.json: %w", tr.err)
	}
	if s.Type != "object" {
		return nil, nil, fmt.Errorf("values.schema.json: the values must be an object, the schema says %q", s.Type)
	}
	return s, tr.dropped, nil
}

// translator carries one translation: the document, for $ref; the $refs
// being inlined, to stop at a cycle; the notes of what was left out.
type translator struct {
	root    map[string]any
	refs    []string
	dropped []string
	// memo holds each $ref's translation: a definition used many times
	// is translated once.
	memo map[string]memoised
	// nodes counts the schemas of the translation with every $ref
	// expanded where it is used, which the CRD will hold: past
	// MaxSchemaNodes the translation fails (err), so that definitions
	// that each refer twice to the next cannot make a gigabyte of CRD.
	nodes int
	err   error
}

// memoised is a $ref's translation and the schemas it holds.
type memoised struct {
	s     *apiextensionsv1.JSONSchemaProps
	nodes int
}

// MaxSchemaNodes bounds the schemas a chart's values.schema.json expands
// to, every $ref inlined where it is used: the largest published CRDs
// hold about ten thousand (a chart's, a few thousand).
const MaxSchemaNodes = 20_000

// drop notes that keyword at path is left out, once.
func (tr *translator) drop(path, keyword string) {
	note := path + ": " + keyword + " cannot be expressed in a CRD schema, left out"
	if !contains(tr.dropped, note) {
		tr.dropped = append(tr.dropped, note)
	}
}

// anyValue is the schema of a value left unchecked.
func anyValue() *apiextensionsv1.JSONSchemaProps {
	return &apiextensionsv1.JSONSchemaProps{XPreserveUnknownFields: ptrTo(true)}
}

// schema translates the JSON schema node at path.
func (tr *translator) schema(node any, path string) *apiextensionsv1.JSONSchemaProps {
	s := tr.build(node, path)
	finish(s)
	return s
}

// build translates node without settling what its keywords leave open
// (finish), so that allOf can merge its branches first.
func (tr *translator) build(node any, path string) *apiextensionsv1.JSONSchemaProps {
	if tr.count(1, path) {
		return anyValue()
	}
	m, ok := node.(map[string]any)
	if !ok {
		if node != true {
			tr.drop(path, fmt.Sprintf("the schema %v", node))
		}
		return anyValue()
	}
	if ref, ok := m["$ref"].(string); ok {
		return tr.ref(m, ref, path)
	}
	s := &apiextensionsv1.JSONSchemaProps{}
	tr.setType(s, m, path)
	tr.values(s, m, path)
	tr.bounds(s, m, path)
	tr.object(s, m, path)
	tr.array(s, m, path)
	for i, branch := range listOf(m["allOf"]) {
		bp := fmt.Sprintf("%s/allOf/%d", path, i)
		tr.merge(s, tr.build(branch, bp), bp)
	}
	for _, k := range []string{"oneOf", "anyOf", "not", "if", "then", "else", "patternProperties", "dependencies",
		"dependentRequired", "dependentSchemas", "propertyNames", "contains", "prefixItems", "additionalItems",
		"unevaluatedProperties", "unevaluatedItems"} {
		if _, ok := m[k]; ok {
			tr.drop(path, k)
		}
	}
	return s
}

// ref inlines the schema a "#/..." $ref points to, with the keywords
// beside the $ref merged in; a recursive $ref leaves the value unchecked.
func (tr *translator) ref(m map[string]any, ref, path string) *apiextensionsv1.JSONSchemaProps {
	target, ok := tr.resolve(ref)
	switch {
	case !ok:
		tr.drop(path, "$ref "+ref)
		return anyValue()
	case contains(tr.refs, ref):
		tr.drop(path, "$ref "+ref+" (recursive)")
		return anyValue()
	}
	var s *apiextensionsv1.JSONSchemaProps
	if m, ok := tr.memo[ref]; ok {
		if tr.count(m.nodes, path) {
			return anyValue()
		}
		s = m.s.DeepCopy()
	} else {
		tr.refs = append(tr.refs, ref)
		before := tr.nodes
		s = tr.build(target, ref)
		tr.refs = tr.refs[:len(tr.refs)-1]
		tr.memo[ref] = memoised{s: s.DeepCopy(), nodes: tr.nodes - before}
	}
	siblings := map[string]any{}
	for k, v := range m {
		if k != "$ref" && k != "description" {
			siblings[k] = v
		}
	}
	if len(siblings) > 0 {
		tr.merge(s, tr.build(siblings, path), path)
	}
	if d, ok := m["description"].(string); ok {
		s.Description = d
	}
	return s
}

// count adds n schemas to the expanded translation and reports whether
// it went past MaxSchemaNodes (then tr.err says where).
func (tr *translator) count(n int, path string) bool {
	if tr.err != nil {
		return true
	}
	tr.nodes += n
	if tr.nodes > MaxSchemaNodes {
		tr.err = fmt.Errorf("the schema expands to more than %d schemas with every $ref inlined where it is used (at %s): a definition referred to many times, each referring to the next, grows it twice per level; refused", MaxSchemaNodes, path)
		return true
	}
	return false
}

// resolve follows a JSON pointer within the document ("#/definitions/X").
func (tr *translator) resolve(ref string) (any, bool) {
	pointer, ok := strings.CutPrefix(ref, "#")
	if !ok {
		return nil, false
	}
	var node any = tr.root
	for _, tok := range strings.Split(strings.TrimPrefix(pointer, "/"), "/") {
		if pointer == "" {
			break
		}
		tok = strings.NewReplacer("~1", "/", "~0", "~").Replace(tok)
		switch n := node.(type) {
		case map[string]any:
			node, ok = n[tok]
		case []any:
			i, err := strconv.Atoi(tok)
			ok = err == nil && i >= 0 && i < len(n)
			if ok {
				node = n[i]
			}
		default:
			ok = false
		}
		if !ok {
			return nil, false
		}
	}
	return node, true
}

// setType sets the type: "null" among several makes the value nullable;
// integer and string make an int-or-string; other unions are left out.
func (tr *translator) setType(s *apiextensionsv1.JSONSchemaProps, m map[string]any, path string) {
	var types []string
	switch t := m["type"].(type) {
	case string:
		types = []string{t}
	case []any:
		for _, x := range t {
			if str, ok := x.(string); ok {
				types = append(types, str)
			}
		}
	}
	var nonNull []string
	for _, t := range types {
		if t != "null" {
			nonNull = append(nonNull, t)
		}
	}
	s.Nullable = len(nonNull) < len(types) || m["nullable"] == true
	has := func(a, b string) bool { return len(nonNull) == 2 && contains(nonNull, a) && contains(nonNull, b) }
	switch {
	case len(nonNull) == 1:
		s.Type = nonNull[0]
	case has("integer", "string"):
		s.XIntOrString = true
	case has("integer", "number"):
		s.Type = "number"
	case len(nonNull) > 1:
		tr.drop(path, fmt.Sprintf("type %v", nonNull))
		s.XPreserveUnknownFields = ptrTo(true)
	}
}

// values translates description, enum, const, default and format.
func (tr *translator) values(s *apiextensionsv1.JSONSchemaProps, m map[string]any, path string) {
	s.Description, _ = m["description"].(string)
	for _, v := range listOf(m["enum"]) {
		s.Enum = append(s.Enum, *rawJSON(v))
	}
	if v, ok := m["const"]; ok {
		s.Enum = []apiextensionsv1.JSON{*rawJSON(v)}
	}
	if v, ok := m["default"]; ok {
		if v == nil && !s.Nullable {
			tr.drop(path, "default null")
		} else {
			s.Default = rawJSON(v)
		}
	}
	if f, ok := m["format"].(string); ok {
		if knownFormats[f] {
			s.Format = f
		} else {
			tr.drop(path, fmt.Sprintf("format %q", f))
		}
	}
}

// knownFormats are the formats the API server checks
// (apiextensions-apiserver's supported formats, plus the numeric ones).
var knownFormats = map[string]bool{
	"bsonobjectid": true, "uri": true, "email": true, "hostname": true, "ipv4": true, "ipv6": true,
	"cidr": true, "mac": true, "uuid": true, "uuid3": true, "uuid4": true, "uuid5": true, "isbn": true,
	"isbn10": true, "isbn13": true, "creditcard": true, "ssn": true, "hexcolor": true, "rgbcolor": true,
	"byte": true, "password": true, "date": true, "duration": true, "datetime": true, "date-time": true,
	"int32": true, "int64": true, "float": true, "double": true,
}

// bounds translates the numeric, length and count keywords, both forms of
// exclusiveMinimum/exclusiveMaximum (draft 4 boolean, draft 6 number).
func (tr *translator) bounds(s *apiextensionsv1.JSONSchemaProps, m map[string]any, path string) {
	s.Minimum, s.Maximum, s.MultipleOf = number(m["minimum"]), number(m["maximum"]), number(m["multipleOf"])
	if b, ok := m["exclusiveMinimum"].(bool); ok {
		s.ExclusiveMinimum = b && s.Minimum != nil
	} else if n := number(m["exclusiveMinimum"]); n != nil && (s.Minimum == nil || *n >= *s.Minimum) {
		s.Minimum, s.ExclusiveMinimum = n, true
	}
	if b, ok := m["exclusiveMaximum"].(bool); ok {
		s.ExclusiveMaximum = b && s.Maximum != nil
	} else if n := number(m["exclusiveMaximum"]); n != nil && (s.Maximum == nil || *n <= *s.Maximum) {
		s.Maximum, s.ExclusiveMaximum = n, true
	}
	s.MinLength, s.MaxLength = count(m["minLength"]), count(m["maxLength"])
	s.MinItems, s.MaxItems = count(m["minItems"]), count(m["maxItems"])
	s.MinProperties, s.MaxProperties = count(m["minProperties"]), count(m["maxProperties"])
	if p, ok := m["pattern"].(string); ok {
		if _, err := regexp.Compile(p); err == nil {
			s.Pattern = p
		} else {
			tr.drop(path, fmt.Sprintf("pattern %q (not RE2 syntax)", p))
		}
	}
}

// object translates properties, required and additionalProperties.
func (tr *translator) object(s *apiextensionsv1.JSONSchemaProps, m map[string]any, path string) {
	if props, ok := m["properties"].(map[string]any); ok {
		s.Properties = map[string]apiextensionsv1.JSONSchemaProps{}
		for _, k := range sortedKeys(props) {
			s.Properties[k] = *tr.schema(props[k], path+"/properties/"+strings.NewReplacer("~", "~0", "/", "~1").Replace(k))
		}
	}
	for _, r := range listOf(m["required"]) {
		if name, ok := r.(string); ok {
			s.Required = append(s.Required, name)
		}
	}
	switch ap := m["additionalProperties"].(type) {
	case bool:
		if ap {
			s.XPreserveUnknownFields = ptrTo(true)
		}
	case map[string]any:
		if s.Properties != nil {
			tr.drop(path, "additionalProperties beside properties")
			break
		}
		s.AdditionalProperties = &apiextensionsv1.JSONSchemaPropsOrBool{Allows: true, Schema: tr.schema(ap, path+"/additionalProperties")}
	}
}

// array translates items and uniqueItems (a set of scalars).
func (tr *translator) array(s *apiextensionsv1.JSONSchemaProps, m map[string]any, path string) {
	switch items := m["items"].(type) {
	case nil:
	case []any:
		tr.drop(path, "items as a list (a tuple)")
		s.Items = &apiextensionsv1.JSONSchemaPropsOrArray{Schema: anyValue()}
	default:
		s.Items = &apiextensionsv1.JSONSchemaPropsOrArray{Schema: tr.schema(items, path+"/items")}
	}
	if m["uniqueItems"] != true {
		return
	}
	if s.Items != nil && contains([]string{"string", "integer", "number", "boolean"}, s.Items.Schema.Type) {
		s.XListType = ptrTo("set")
		return
	}
	tr.drop(path, "uniqueItems of non-scalar items")
}

// merge adds what b says to s (allOf, or the keywords beside a $ref):
// properties are merged, required lists joined; a keyword both say
// differently keeps s's value and is noted.
func (tr *translator) merge(s, b *apiextensionsv1.JSONSchemaProps, path string) {
	base, add := schemaMap(s), schemaMap(b)
	for _, k := range mergeMaps(base, add) {
		tr.drop(path, "keyword "+k+" given twice with different values")
	}
	raw, _ := json.Marshal(base)
	*s = apiextensionsv1.JSONSchemaProps{}
	_ = json.Unmarshal(raw, s)
}

// mergeMaps adds b's keys to a and returns the keys in conflict.
func mergeMaps(a, b map[string]any) []string {
	var conflicts []string
	for _, k := range sortedKeys(b) {
		av, ok := a[k]
		switch {
		case !ok:
			a[k] = b[k]
		case k == "properties":
			ap, bp := av.(map[string]any), b[k].(map[string]any)
			for _, name := range sortedKeys(bp) {
				if x, ok := ap[name].(map[string]any); ok {
					conflicts = append(conflicts, mergeMaps(x, bp[name].(map[string]any))...)
				} else {
					ap[name] = bp[name]
				}
			}
		case k == "required":
			for _, r := range b[k].([]any) {
				if !containsAny(av.([]any), r) {
					av = append(av.([]any), r)
				}
			}
			a[k] = av
		case !reflect.DeepEqual(av, b[k]):
			conflicts = append(conflicts, k)
		}
	}
	return conflicts
}

// finish settles what the keywords left open: an object or array by its
// keywords, a value of no type unchecked, an object without properties
// open to any field, an array's items.
func finish(s *apiextensionsv1.JSONSchemaProps) {
	if s.Type == "" && !s.XIntOrString {
		switch {
		case s.Properties != nil || s.AdditionalProperties != nil:
			s.Type = "object"
		case s.Items != nil:
			s.Type = "array"
		default:
			s.XPreserveUnknownFields = ptrTo(true)
		}
	}
	if s.Type == "object" && s.Properties == nil && s.AdditionalProperties == nil {
		s.XPreserveUnknownFields = ptrTo(true)
	}
	if s.Type == "array" && s.Items == nil {
		s.Items = &apiextensionsv1.JSONSchemaPropsOrArray{Schema: anyValue()}
	}
}

// schemaMap is s as a JSON map, for merging.
func schemaMap(s *apiextensionsv1.JSONSchemaProps) map[string]any {
	var m map[string]any
	_ = json.Unmarshal(rawJSON(s).Raw, &m)
	return m
}

func listOf(v any) []any {
	l, _ := v.([]any)
	return l
}

func containsAny(list []any, v any) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

// number reads a JSON number.
func number(v any) *float64 {
	if n, ok := v.(json.Number); ok {
		if f, err := n.Float64(); err == nil {
			return &f
		}
	}
	return nil
}

// count reads a JSON non-negative integer.
func count(v any) *int64 {
	if n, ok := v.(json.Number); ok {
		if i, err := n.Int64(); err == nil && i >= 0 {
			return &i
		}
	}
	return nil
}
