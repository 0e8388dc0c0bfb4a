package crd

import (
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Simple parses an object in kro's SimpleSchema notation: each field name
// maps to "type | marker=value ...", to a nested mapping (an object), or
// to "[]T" / "map[string]T". Types: string, integer, number, boolean,
// object; markers: required, default, minimum, maximum, minLength,
// maxLength, pattern, enum (values separated by ","), maxItems,
// maxProperties, description. Errors name the field path under p.
func Simple(fields map[string]any, p *field.Path) (*apiextensionsv1.JSONSchemaProps, field.ErrorList) {
	out := &apiextensionsv1.JSONSchemaProps{Type: "object"}
	var errs field.ErrorList
	for _, name := range sortedKeys(fields) {
		fp := p.Child(name)
		var (
			s        *apiextensionsv1.JSONSchemaProps
			required bool
			ferrs    field.ErrorList
		)
		switch v := fields[name].(type) {
		case map[string]any:
			s, ferrs = Simple(v, fp)
		case string:
			s, required, ferrs = simpleField(v, fp)
		default:
			ferrs = field.ErrorList{field.Invalid(fp, v, `must be "type | markers" or a mapping of fields`)}
		}
		errs = append(errs, ferrs...)
		if s == nil {
			continue
		}
		if out.Properties == nil {
			out.Properties = map[string]apiextensionsv1.JSONSchemaProps{}
		}
		out.Properties[name] = *s
		if required {
			out.Required = append(out.Required, name)
		}
	}
	return out, errs
}

// simpleField parses one "type | markers" string: the schema, whether the
// field is required in its parent.
func simpleField(spec string, fp *field.Path) (*apiextensionsv1.JSONSchemaProps, bool, field.ErrorList) {
	typ, rest, _ := strings.Cut(spec, "|")
	s, err := simpleType(strings.TrimSpace(typ))
	if err != nil {
		return nil, false, field.ErrorList{field.Invalid(fp, spec, err.Error())}
	}
	markers, err := parseMarkers(rest)
	if err != nil {
		return nil, false, field.ErrorList{field.Invalid(fp, spec, err.Error())}
	}
	required, errs := applyMarkers(s, markers, fp)
	if len(errs) == 0 {
		errs = checkBounds(s, fp)
	}
	return s, required, errs
}

// simpleType parses a SimpleSchema type: a scalar, object, []T or
// map[string]T.
func simpleType(t string) (*apiextensionsv1.JSONSchemaProps, error) {
	switch {
	case t == "string" || t == "integer" || t == "number" || t == "boolean":
		return &apiextensionsv1.JSONSchemaProps{Type: t}, nil
	case t == "object":
		return &apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: ptrTo(true)}, nil
	case strings.HasPrefix(t, "[]"):
		item, err := simpleType(t[2:])
		if err != nil {
			return nil, err
		}
		return &apiextensionsv1.JSONSchemaProps{Type: "array", Items: &apiextensionsv1.JSONSchemaPropsOrArray{Schema: item}}, nil
	case strings.HasPrefix(t, "map[string]"):
		item, err := simpleType(t[len("map[string]"):])
		if err != nil {
			return nil, err
		}
		return &apiextensionsv1.JSONSchemaProps{Type: "object", AdditionalProperties: &apiextensionsv1.JSONSchemaPropsOrBool{Allows: true, Schema: item}}, nil
	}
	return nil, fmt.Errorf("unknown type %q: want string, integer, number, boolean, object, []T or map[string]T", t)
}

// marker is one key=value after the "|".
type marker struct{ key, value string }

// parseMarkers splits `a=1 b="x y"` into markers; a quoted value follows
// Go's string escapes ("\\s" is \s).
func parseMarkers(s string) ([]marker, error) {
	var out []marker
	for s = strings.TrimSpace(s); s != ""; s = strings.TrimSpace(s) {
		key, rest, ok := strings.Cut(s, "=")
		if !ok || key == "" || strings.ContainsAny(key, " \t\"") {
			return nil, fmt.Errorf("marker %q: want key=value", strings.Fields(s)[0])
		}
		var value string
		if strings.HasPrefix(rest, `"`) {
			q, err := strconv.QuotedPrefix(rest)
			if err != nil {
				return nil, fmt.Errorf("marker %s: unterminated or malformed quoted value", key)
			}
			value, _ = strconv.Unquote(q)
			rest = rest[len(q):]
		} else {
			end := strings.IndexAny(rest, " \t")
			if end < 0 {
				end = len(rest)
			}
			value, rest = rest[:end], rest[end:]
		}
		out = append(out, marker{key, value})
		s = rest
	}
	return out, nil
}

// markerTypes lists, for each marker, the schema types it applies to
// ("" for any).
var markerTypes = map[string][]string{
	"required": nil, "description": nil, "default": nil,
	"minimum": {"integer", "number"}, "maximum": {"integer", "number"},
	"minLength": {"string"}, "maxLength": {"string"}, "pattern": {"string"},
	"enum":     {"string", "integer", "number"},
	"minItems": {"array"}, "maxItems": {"array"},
	"minProperties": {"object"}, "maxProperties": {"object"},
}

// applyMarkers sets each marker on s; it reports whether required=true.
func applyMarkers(s *apiextensionsv1.JSONSchemaProps, markers []marker, fp *field.Path) (bool, field.ErrorList) {
	var errs field.ErrorList
	required := false
	seen := map[string]bool{}
	for _, m := range markers {
		bad := func(detail string) {
			errs = append(errs, field.Invalid(fp, m.key+"="+m.value, "marker "+m.key+": "+detail))
		}
		types, known := markerTypes[m.key]
		switch {
		case !known:
			bad("unknown marker")
			continue
		case seen[m.key]:
			bad("given twice")
			continue
		case types != nil && !contains(types, s.Type):
			bad(fmt.Sprintf("does not apply to type %s", s.Type))
			continue
		}
		seen[m.key] = true
		if m.key == "required" {
			b, err := strconv.ParseBool(m.value)
			if err != nil {
				bad("want true or false")
			}
			required = b
			continue
		}
		if err := setMarker(s, m); err != nil {
			bad(err.Error())
		}
	}
	return required, errs
}

// setMarker sets one marker other than required on s.
func setMarker(s *apiextensionsv1.JSONSchemaProps, m marker) error {
	var err error
	switch m.key {
	case "description":
		s.Description = m.value
	case "pattern":
		if _, err = regexp.Compile(m.value); err == nil {
			s.Pattern = m.value
		}
	case "minimum":
		s.Minimum, err = parseNumber(s.Type, m.value)
	case "maximum":
		s.Maximum, err = parseNumber(s.Type, m.value)
	case "minLength":
		s.MinLength, err = parseCount(m.value)
	case "maxLength":
		s.MaxLength, err = parseCount(m.value)
	case "minItems":
		s.MinItems, err = parseCount(m.value)
	case "maxItems":
		s.MaxItems, err = parseCount(m.value)
	case "minProperties":
		s.MinProperties, err = parseCount(m.value)
	case "maxProperties":
		s.MaxProperties, err = parseCount(m.value)
	case "default":
		var v any
		if v, err = typedValue(s.Type, m.value); err == nil {
			s.Default = rawJSON(v)
		}
	case "enum":
		for _, item := range strings.Split(m.value, ",") {
			var v any
			if v, err = typedValue(s.Type, strings.TrimSpace(item)); err != nil {
				return err
			}
			s.Enum = append(s.Enum, *rawJSON(v))
		}
	}
	return err
}

// typedValue parses a marker value as a value of type t: scalars from
// their text, arrays and objects from JSON.
func typedValue(t, v string) (any, error) {
	switch t {
	case "string":
		return v, nil
	case "boolean":
		b, err := strconv.ParseBool(v)
		if err != nil {
			return nil, fmt.Errorf("%q is not a boolean", v)
		}
		return b, nil
	case "integer", "number":
		n, err := parseNumber(t, v)
		if err != nil {
			return nil, err
		}
		if t == "integer" {
			return int64(*n), nil
		}
		return *n, nil
	}
	var x any
	if err := json.Unmarshal([]byte(v), &x); err != nil {
		return nil, fmt.Errorf("want a JSON %s: %v", t, err)
	}
	if _, isList := x.([]any); isList != (t == "array") || x == nil {
		return nil, fmt.Errorf("want a JSON %s", t)
	}
	if _, isMap := x.(map[string]any); t == "object" && !isMap {
		return nil, fmt.Errorf("want a JSON %s", t)
	}
	return x, nil
}

// parseNumber parses v as a number; for an integer field it must be whole.
func parseNumber(t, v string) (*float64, error) {
	n, err := strconv.ParseFloat(v, 64)
	if err != nil || math.IsInf(n, 0) || math.IsNaN(n) {
		return nil, fmt.Errorf("%q is not a number", v)
	}
	if t == "integer" && n != math.Trunc(n) {
		return nil, fmt.Errorf("%q is not an integer", v)
	}
	return &n, nil
}

// parseCount parses a non-negative integer.
func parseCount(v string) (*int64, error) {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return nil, fmt.Errorf("%q is not a non-negative integer", v)
	}
	return &n, nil
}

// checkBounds refuses bounds that contradict each other or the default.
func checkBounds(s *apiextensionsv1.JSONSchemaProps, fp *field.Path) field.ErrorList {
	var errs field.ErrorList
	if s.Minimum != nil && s.Maximum != nil && *s.Minimum > *s.Maximum {
		errs = append(errs, field.Invalid(fp, *s.Minimum, fmt.Sprintf("minimum %v is greater than maximum %v", *s.Minimum, *s.Maximum)))
	}
	if s.MinLength != nil && s.MaxLength != nil && *s.MinLength > *s.MaxLength {
		errs = append(errs, field.Invalid(fp, *s.MinLength, fmt.Sprintf("minLength %d is greater than maxLength %d", *s.MinLength, *s.MaxLength)))
	}
	if s.Default == nil {
		return errs
	}
	var d any
	_ = json.Unmarshal(s.Default.Raw, &d)
	if n, ok := d.(float64); ok {
		if s.Minimum != nil && n < *s.Minimum || s.Maximum != nil && n > *s.Maximum {
			errs = append(errs, field.Invalid(fp, d, "default is outside minimum/maximum"))
		}
	}
	if str, ok := d.(string); ok && !stringFits(s, str) {
		errs = append(errs, field.Invalid(fp, d, "default does not satisfy minLength/maxLength/pattern"))
	}
	if len(s.Enum) > 0 && !enumHas(s.Enum, s.Default) {
		errs = append(errs, field.Invalid(fp, d, "default is not one of enum"))
	}
	return errs
}

// stringFits reports whether str satisfies the string bounds of s.
func stringFits(s *apiextensionsv1.JSONSchemaProps, str string) bool {
	n := int64(len([]rune(str)))
	if s.MinLength != nil && n < *s.MinLength || s.MaxLength != nil && n > *s.MaxLength {
		return false
	}
	if s.Pattern != "" {
		if re, err := regexp.Compile(s.Pattern); err == nil && !re.MatchString(str) {
			return false
		}
	}
	return true
}

// enumHas reports whether v is among enum, compared as JSON.
func enumHas(enum []apiextensionsv1.JSON, v *apiextensionsv1.JSON) bool {
	for _, e := range enum {
		if string(e.Raw) == string(v.Raw) {
			return true
		}
	}
	return false
}

// rawJSON wraps v, a JSON value, as a schema value.
func rawJSON(v any) *apiextensionsv1.JSON {
	raw, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("crd: marshal %T: %v", v, err)) // v comes from JSON or is a scalar
	}
	return &apiextensionsv1.JSON{Raw: raw}
}

// sortedKeys returns the keys of m in order, for deterministic output.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func ptrTo[T any](v T) *T { return &v }
