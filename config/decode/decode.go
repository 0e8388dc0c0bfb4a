// Package decode decodes the JSON form of a YAML document into typed
// structs, driven by their json tags alone, so that every unknown field and
// every type error is reported at its full path (a field.ErrorList), not
// only the first one encoding/json meets. Package config decodes its file
// with it.
//
// The choice a newcomer may question: it does not use encoding/json's
// DisallowUnknownFields. That stops at the first error and names no path
// in a list; a config with three mistakes should get three messages, each
// naming its entry and field.
package decode

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Decoder decodes JSON into typed structs by their json tags. Keys match
// exactly: Templates is not templates.
type Decoder struct {
	// Set holds the paths of the fields the document sets (not null):
	// what tells "steps: 0" from no steps.
	Set map[string]bool
}

// Self is a type that decodes itself (a template is a path or a mapping;
// a scalar is printed text).
type Self interface {
	DecodeJSON(d *Decoder, raw json.RawMessage, p *field.Path) field.ErrorList
}

// Describer is a type that words its own description in type errors: one
// value, and the plural for a list of them ("" words a list as "a list").
type Describer interface {
	Describe() (one, many string)
}

var (
	selfDecoderType = reflect.TypeFor[Self]()
	describerType   = reflect.TypeFor[Describer]()
	unmarshalerType = reflect.TypeFor[json.Unmarshaler]()
	intOrStringType = reflect.TypeFor[intstr.IntOrString]()
)

// Decode decodes raw into v, which describes a field at p. noun, from the
// field's desc tag, names the items of a list field in messages.
func (d *Decoder) Decode(raw json.RawMessage, v reflect.Value, p *field.Path, noun string) field.ErrorList {
	t := v.Type()
	switch {
	case Kind(raw) == "null":
		return d.TypeError(raw, t, p, noun)
	case reflect.PointerTo(t).Implements(selfDecoderType):
		return v.Addr().Interface().(Self).DecodeJSON(d, raw, p)
	case reflect.PointerTo(t).Implements(unmarshalerType):
		if json.Unmarshal(raw, v.Addr().Interface()) != nil {
			return d.TypeError(raw, t, p, noun)
		}
		return nil
	}
	switch t.Kind() {
	case reflect.Pointer:
		elem := reflect.New(t.Elem())
		errs := d.Decode(raw, elem.Elem(), p, noun)
		if !slices.ContainsFunc(errs, func(e *field.Error) bool { return e.Field == p.String() }) {
			v.Set(elem)
		}
		return errs
	case reflect.Struct:
		return d.Struct(raw, v, p)
	case reflect.Slice:
		var items []json.RawMessage
		if Kind(raw) != "a list" || json.Unmarshal(raw, &items) != nil {
			return d.TypeError(raw, t, p, noun)
		}
		v.Set(reflect.MakeSlice(t, len(items), len(items)))
		var errs field.ErrorList
		for j, item := range items {
			errs = append(errs, d.Decode(item, v.Index(j), p.Index(j), noun)...)
		}
		return errs
	case reflect.Map:
		var m map[string]json.RawMessage
		if Kind(raw) != "a mapping" || json.Unmarshal(raw, &m) != nil {
			return d.TypeError(raw, t, p, noun)
		}
		v.Set(reflect.MakeMapWithSize(t, len(m)))
		var errs field.ErrorList
		for _, k := range slices.Sorted(maps.Keys(m)) {
			elem := reflect.New(t.Elem()).Elem()
			errs = append(errs, d.Decode(m[k], elem, p.Child(k), noun)...)
			v.SetMapIndex(reflect.ValueOf(k), elem)
		}
		return errs
	}
	if json.Unmarshal(raw, v.Addr().Interface()) != nil {
		return d.TypeError(raw, t, p, noun)
	}
	return nil
}

// Struct decodes a mapping into the struct v: every key its json tags do
// not name is an unknown field; null means absent.
func (d *Decoder) Struct(raw json.RawMessage, v reflect.Value, p *field.Path) field.ErrorList {
	var m map[string]json.RawMessage
	if Kind(raw) != "a mapping" || json.Unmarshal(raw, &m) != nil {
		return d.TypeError(raw, v.Type(), p, "")
	}
	fields := Fields(v.Type())
	known := make([]string, len(fields))
	for k, f := range fields {
		known[k] = f.Name
	}
	var errs field.ErrorList
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if !slices.Contains(known, k) {
			errs = append(errs, field.Invalid(p.Child(k), k, fmt.Sprintf("unknown field %q (known: %s)", k, strings.Join(known, ", "))))
		}
	}
	for _, f := range fields {
		raw, ok := m[f.Name]
		if !ok || Kind(raw) == "null" {
			continue
		}
		fp := p.Child(f.Name)
		if d.Set != nil {
			d.Set[fp.String()] = true
		}
		errs = append(errs, d.Decode(raw, v.Field(f.Index), fp, f.Noun)...)
	}
	return errs
}

// TypeError says the value at p is not what a t holds.
func (d *Decoder) TypeError(raw json.RawMessage, t reflect.Type, p *field.Path, noun string) field.ErrorList {
	one, _ := describe(t, noun)
	msg := fmt.Sprintf("must be %s, not %s", one, Kind(raw))
	switch {
	case Kind(raw) != "a number":
	case t == intOrStringType:
		msg = fmt.Sprintf(`%s: must be a whole number of at least 1, or a percentage such as "25%%"`, raw)
	case isNumeric(t):
		msg = fmt.Sprintf("%s: must be %s", raw, one)
	}
	if p == nil {
		msg = "top level " + msg
	}
	return field.ErrorList{field.TypeInvalid(p, nil, msg)}
}

// Field is a field of a struct as the document names it.
type Field struct {
	Name  string // the json tag's name
	Index int
	Noun  string // the desc tag: what the items of a list field are
}

var fieldCache sync.Map // reflect.Type -> []Field

// Fields lists the fields of struct type t that have a json name, in
// declaration order: the order of "known:" lists and of messages.
func Fields(t reflect.Type) []Field {
	if f, ok := fieldCache.Load(t); ok {
		return f.([]Field)
	}
	var out []Field
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" || name == "-" || !f.IsExported() {
			continue
		}
		out = append(out, Field{Name: name, Index: i, Noun: f.Tag.Get("desc")})
	}
	fieldCache.Store(t, out)
	return out
}

// FieldNames lists the json names of t's fields; required leaves out the
// ones tagged omitempty.
func FieldNames(t reflect.Type, required bool) []string {
	var out []string
	for _, f := range Fields(t) {
		if !required || !strings.Contains(t.Field(f.Index).Tag.Get("json"), ",omitempty") {
			out = append(out, f.Name)
		}
	}
	return out
}

// describe words what a value of type t is, for "must be ..." messages:
// one value, and a list of them. noun, when set, names the items of a list.
func describe(t reflect.Type, noun string) (one, many string) {
	switch {
	case t.Kind() == reflect.Pointer:
		return describe(t.Elem(), noun)
	case noun != "" && t.Kind() != reflect.Slice:
		return "a " + noun, noun + "s"
	case t.Implements(describerType):
		return reflect.Zero(t).Interface().(Describer).Describe()
	case t == intOrStringType:
		return "a number or a percentage", "numbers or percentages"
	case t.Kind() == reflect.String:
		return "a string", "strings"
	case t.Kind() == reflect.Bool:
		return "true or false", "booleans"
	case isNumeric(t):
		return "a whole number", "whole numbers"
	case t.Kind() == reflect.Slice:
		if _, items := describe(t.Elem(), noun); items != "" {
			return "a list of " + items, "lists"
		}
		return "a list", "lists"
	case t.Kind() == reflect.Struct:
		return "a mapping with " + joinNames(FieldNames(t, false)), "mappings"
	}
	return "a mapping", "mappings"
}

// joinNames joins names as a sentence does: "a and b", "a, b, c".
func joinNames(names []string) string {
	if len(names) == 2 {
		return names[0] + " and " + names[1]
	}
	return strings.Join(names, ", ")
}

// isNumeric reports whether t holds a JSON number.
func isNumeric(t reflect.Type) bool {
	return t == intOrStringType || t.Kind() >= reflect.Int && t.Kind() <= reflect.Int64
}

// Kind names the kind of a JSON value for messages: "null", "a string",
// "a number", "a boolean", "a list" or "a mapping".
func Kind(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return "null"
	}
	switch raw[0] {
	case '"':
		return "a string"
	case '{':
		return "a mapping"
	case '[':
		return "a list"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

// ScalarText is the printed text of a JSON string, number or boolean.
func ScalarText(raw json.RawMessage) (string, bool) {
	switch Kind(raw) {
	case "a string":
		var s string
		err := json.Unmarshal(raw, &s)
		return s, err == nil
	case "a number", "a boolean":
		return string(bytes.TrimSpace(raw)), true
	}
	return "", false
}
