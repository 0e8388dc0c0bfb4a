package templates

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"text/template"

	"sigs.k8s.io/yaml"
)

// Funcs returns the function map templates are parsed with. It is small and
// hermetic: no function reads the environment, files, the clock, randomness
// or the network, so a template renders the same children for the same
// custom resource on every pass and on every replica.
//
// Besides the text/template builtins (and, or, not, len, index, slice, print,
// printf, println, eq, ne, lt, le, gt, ge, ...), templates may call:
//
//	get MAP KEY DEFAULT   MAP[KEY], or DEFAULT when the key is absent or MAP is nil:
//	                      {{ get .Spec "replicas" 1 }}. Use it for optional spec
//	                      fields: with missingkey=error, .Spec.replicas on a
//	                      missing key is an error.
//	default DEFAULT VALUE VALUE, or DEFAULT when VALUE is present but empty
//	                      (nil, "", 0, false, empty list or map).
//	required MSG VALUE    VALUE, or an error with MSG when VALUE is nil or "".
//	empty VALUE           whether VALUE is nil, "", 0, false or an empty list/map.
//	coalesce VALUE...     the first non-empty VALUE, or nil.
//	hasKey MAP KEY        whether MAP has KEY.
//	quote VALUE           VALUE as a double-quoted YAML/JSON string.
//	squote VALUE          VALUE as a single-quoted YAML string.
//	toYaml VALUE          VALUE as YAML (keys sorted, no trailing newline).
//	toJson VALUE          VALUE as compact JSON.
//	indent N TEXT         TEXT with every line indented by N spaces.
//	nindent N TEXT        a newline, then indent N TEXT.
//	lower TEXT, upper TEXT, trim TEXT
//	trimPrefix PREFIX TEXT, trimSuffix SUFFIX TEXT
//	trunc N TEXT          the first N bytes of TEXT (the last -N when N < 0).
//	dnsLabel TEXT         TEXT made a DNS-1123 label: lowercased, every other
//	                      character replaced by '-', at most 63 characters,
//	                      no leading or trailing '-'.
//	replace OLD NEW TEXT  TEXT with every OLD replaced by NEW.
//	contains SUB TEXT, hasPrefix PREFIX TEXT, hasSuffix SUFFIX TEXT
//	join SEP LIST         the elements of LIST, formatted, joined by SEP.
//	list VALUE...         a list of the VALUEs.
//	dict KEY VALUE...     a map from the string KEYs to their VALUEs.
//	toString VALUE        VALUE formatted as text.
//	int64 VALUE           VALUE (a number or numeric string) as an integer;
//	                      an error when it is not a whole number.
//	float64 VALUE         VALUE (a number or numeric string) as a float.
//	b64enc TEXT           TEXT base64-encoded (standard encoding).
//
// Spec numbers reach templates as int64 or float64, never Go int; the
// functions above accept either wherever they take a number.
func Funcs() template.FuncMap {
	return template.FuncMap{
		"get":        get,
		"default":    dfault,
		"required":   required,
		"empty":      empty,
		"coalesce":   coalesce,
		"hasKey":     hasKey,
		"quote":      quote,
		"squote":     squote,
		"toYaml":     toYAML,
		"toJson":     toJSON,
		"indent":     indent,
		"nindent":    nindent,
		"lower":      func(s any) string { return strings.ToLower(toString(s)) },
		"upper":      func(s any) string { return strings.ToUpper(toString(s)) },
		"trim":       func(s any) string { return strings.TrimSpace(toString(s)) },
		"trimPrefix": func(p string, s any) string { return strings.TrimPrefix(toString(s), p) },
		"trimSuffix": func(p string, s any) string { return strings.TrimSuffix(toString(s), p) },
		"trunc":      trunc,
		"dnsLabel":   dnsLabel,
		"replace":    func(old, new string, s any) string { return strings.ReplaceAll(toString(s), old, new) },
		"contains":   func(sub string, s any) bool { return strings.Contains(toString(s), sub) },
		"hasPrefix":  func(p string, s any) bool { return strings.HasPrefix(toString(s), p) },
		"hasSuffix":  func(p string, s any) bool { return strings.HasSuffix(toString(s), p) },
		"join":       join,
		"list":       func(v ...any) []any { return append([]any{}, v...) },
		"dict":       dict,
		"toString":   toString,
		"int64":      toInt64,
		"float64":    toFloat64,
		"b64enc":     func(s any) string { return base64.StdEncoding.EncodeToString([]byte(toString(s))) },
		// sha256sum makes a checksum annotation, so that a change of what a
		// Deployment reads (a ConfigMap's content) rolls its pods.
		"sha256sum": func(s any) string { sum := sha256.Sum256([]byte(toString(s))); return hex.EncodeToString(sum[:]) },
	}
}

func get(m any, key string, def any) any {
	if m == nil {
		return def
	}
	rv := reflect.ValueOf(m)
	if rv.Kind() != reflect.Map || rv.Type().Key().Kind() != reflect.String {
		return def
	}
	v := rv.MapIndex(reflect.ValueOf(key).Convert(rv.Type().Key()))
	if !v.IsValid() {
		return def
	}
	return v.Interface()
}

func dfault(def any, v ...any) any {
	if len(v) == 0 || empty(v[0]) {
		return def
	}
	return v[0]
}

func required(msg string, v any) (any, error) {
	if v == nil {
		return nil, errors.New(msg)
	}
	if s, ok := v.(string); ok && s == "" {
		return nil, errors.New(msg)
	}
	return v, nil
}

func empty(v any) bool {
	if v == nil {
		return true
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.String, reflect.Slice, reflect.Map, reflect.Array:
		return rv.Len() == 0
	case reflect.Bool:
		return !rv.Bool()
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return rv.Int() == 0
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return rv.Uint() == 0
	case reflect.Float32, reflect.Float64:
		return rv.Float() == 0
	case reflect.Pointer, reflect.Interface:
		return rv.IsNil()
	}
	return false
}

func coalesce(v ...any) any {
	for _, e := range v {
		if !empty(e) {
			return e
		}
	}
	return nil
}

func hasKey(m any, key string) bool {
	if m == nil {
		return false
	}
	rv := reflect.ValueOf(m)
	if rv.Kind() != reflect.Map || rv.Type().Key().Kind() != reflect.String {
		return false
	}
	return rv.MapIndex(reflect.ValueOf(key).Convert(rv.Type().Key())).IsValid()
}

func quote(v any) (string, error) {
	return marshalJSONString(toString(v))
}

func marshalJSONString(s string) (string, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(s); err != nil {
		return "", err
	}
	return strings.TrimSuffix(b.String(), "\n"), nil
}

func squote(v any) string {
	return "'" + strings.ReplaceAll(toString(v), "'", "''") + "'"
}

func toYAML(v any) (string, error) {
	b, err := yaml.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("toYaml: %w", err)
	}
	return strings.TrimSuffix(string(b), "\n"), nil
}

func toJSON(v any) (string, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return "", fmt.Errorf("toJson: %w", err)
	}
	return strings.TrimSuffix(b.String(), "\n"), nil
}

func indent(n any, s any) (string, error) {
	k, err := toInt64(n)
	if err != nil {
		return "", err
	}
	if k < 0 || k > 1024 {
		return "", fmt.Errorf("indent: %d is out of range 0..1024", k)
	}
	pad := strings.Repeat(" ", int(k))
	return pad + strings.ReplaceAll(toString(s), "\n", "\n"+pad), nil
}

func nindent(n any, s any) (string, error) {
	out, err := indent(n, s)
	return "\n" + out, err
}

func trunc(n any, s any) (string, error) {
	k, err := toInt64(n)
	if err != nil {
		return "", err
	}
	str := toString(s)
	switch {
	case k >= 0 && int64(len(str)) > k:
		return str[:k], nil
	case k < 0 && int64(len(str)) > -k:
		return str[int64(len(str))+k:], nil
	}
	return str, nil
}

func dnsLabel(v any) (string, error) {
	in := strings.ToLower(toString(v))
	b := make([]byte, 0, len(in))
	for i := 0; i < len(in); i++ {
		c := in[i]
		if (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') {
			b = append(b, c)
		} else if len(b) > 0 && b[len(b)-1] != '-' {
			b = append(b, '-')
		}
	}
	out := strings.Trim(string(b), "-")
	if len(out) > 63 {
		out = strings.TrimRight(out[:63], "-")
	}
	if out == "" {
		return "", fmt.Errorf("dnsLabel: %q has no letters or digits", toString(v))
	}
	return out, nil
}

func join(sep string, l any) (string, error) {
	if l == nil {
		return "", nil
	}
	rv := reflect.ValueOf(l)
	if rv.Kind() != reflect.Slice && rv.Kind() != reflect.Array {
		return "", fmt.Errorf("join: want a list, got %T", l)
	}
	parts := make([]string, rv.Len())
	for i := range parts {
		parts[i] = toString(rv.Index(i).Interface())
	}
	return strings.Join(parts, sep), nil
}

func dict(kv ...any) (map[string]any, error) {
	if len(kv)%2 != 0 {
		return nil, errors.New("dict: want KEY VALUE pairs, got an odd number of arguments")
	}
	m := make(map[string]any, len(kv)/2)
	for i := 0; i < len(kv); i += 2 {
		k, ok := kv[i].(string)
		if !ok {
			return nil, fmt.Errorf("dict: key %v is %T, want a string", kv[i], kv[i])
		}
		m[k] = kv[i+1]
	}
	return m, nil
}

func toString(v any) string {
	switch v := v.(type) {
	case nil:
		return ""
	case string:
		return v
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64)
	case fmt.Stringer:
		return v.String()
	}
	return fmt.Sprint(v)
}

func toInt64(v any) (int64, error) {
	switch n := v.(type) {
	case int64:
		return n, nil
	case int:
		return int64(n), nil
	case int32:
		return int64(n), nil
	case float64:
		if n != math.Trunc(n) || n < math.MinInt64 || n >= math.MaxInt64 {
			return 0, fmt.Errorf("int64: %v is not a whole number", n)
		}
		return int64(n), nil
	case string:
		i, err := strconv.ParseInt(strings.TrimSpace(n), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("int64: %q is not a whole number", n)
		}
		return i, nil
	case nil:
		return 0, errors.New("int64: no value")
	}
	return 0, fmt.Errorf("int64: %v (%T) is not a number", v, v)
}

func toFloat64(v any) (float64, error) {
	switch n := v.(type) {
	case float64:
		return n, nil
	case int64:
		return float64(n), nil
	case int:
		return float64(n), nil
	case string:
		f, err := strconv.ParseFloat(strings.TrimSpace(n), 64)
		if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
			return 0, fmt.Errorf("float64: %q is not a number", n)
		}
		return f, nil
	case nil:
		return 0, errors.New("float64: no value")
	}
	return 0, fmt.Errorf("float64: %v (%T) is not a number", v, v)
}
