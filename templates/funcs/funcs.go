// Package funcs is the function vocabulary of stencil's templates and the
// policy both template modes derive their rules from: what each function
// stencil knows of is (random, reading the clock, serialising, parsing,
// rendering template text, Helm's own, following Go's map order). Own
// templates are written in Hermetic; chart mode runs Helm's functions,
// and refuses, checks, frames or sorts (Ordered) them by the same table.
//
// The choice a newcomer may question: the policy is one table of classes,
// not a list per mode. A function a mode treats specially is in the table,
// or it is not treated specially anywhere, so a function added to one
// mode's rules cannot be missed by the other's.
package funcs

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"text/template"

	"github.com/Masterminds/sprig/v3"
	"sigs.k8s.io/yaml"
)

// unrepeatable are the functions (of the policy table) that do not give
// the same output for the same input on every pass and every replica: the
// local clock or time zone, randomness, fresh keys and certificates. Own
// templates do without them.
const unrepeatable = Random | Clock | ClockUnlessDated | LocalTime

// Hermetic returns the vocabulary templates are written in: the one chart
// authors know. It is sprig's hermetic set (github.com/Masterminds/sprig/v3
// HermeticTxtFuncMap) minus what still depends on the clock or randomness
// (see unrepeatable) or on the environment or the network, with every name
// the policy table does not classify refused (NotClassified), keys and
// values sorted (Ordered), Helm's additions (toYaml, fromYaml, toJson,
// fromJson, required, include) and stencil's own:
//
//	get MAP KEY DEFAULT   MAP[KEY], or DEFAULT when the key is absent or MAP is nil
//	                      ({{ get .Spec "replicas" 1 }}: with missingkey=error,
//	                      .Spec.replicas on a missing key is an error). It
//	                      replaces sprig's two-argument get.
//	hasKey MAP KEY        whether MAP (any map with string keys) has KEY.
//	dnsLabel TEXT         TEXT made a DNS-1123 label: lowercased, every other
//	                      character replaced by '-', at most 63 characters.
//	sha256sum VALUE       the hex SHA-256 of VALUE as text, for a checksum
//	                      annotation that rolls pods when what they read changes.
//
// Every function is hermetic: none reads the environment, files, the clock,
// randomness or the network, so a template renders the same children for
// the same custom resource on every pass and on every replica. include
// here is a stand-in: templates.Load binds the real one, which needs the template set.
func Hermetic() template.FuncMap {
	// A function a new sprig adds, which the policy table does not know,
	// is refused (NotClassified), not bound as it comes.
	m := refuseUnclassified(Ordered(sprig.HermeticTxtFuncMap()))
	for _, name := range Named(unrepeatable | Environment | Network) {
		delete(m, name)
	}
	m["get"] = get
	// sprig's hasKey takes only map[string]interface{}; this one gives the
	// same answers there and also reads .Labels and .Annotations.
	m["hasKey"] = hasKey
	m["dnsLabel"] = dnsLabel
	m["sha256sum"] = func(s any) string { sum := sha256.Sum256([]byte(toString(s))); return hex.EncodeToString(sum[:]) }
	m["required"] = required
	m["toYaml"] = ToYAML
	m["toJson"] = ToJSON
	m["fromYaml"] = fromYAML
	m["fromJson"] = fromJSON
	m["include"] = func(string, any) (string, error) {
		return "", errors.New("include is bound when the templates are loaded")
	}
	return m
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

func required(msg string, v any) (any, error) {
	if v == nil {
		return nil, errors.New(msg)
	}
	if s, ok := v.(string); ok && s == "" {
		return nil, errors.New(msg)
	}
	return v, nil
}

// ToYAML is toYaml: v as YAML, without the final newline.
func ToYAML(v any) (string, error) {
	b, err := yaml.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("toYaml: %w", err)
	}
	return strings.TrimSuffix(string(b), "\n"), nil
}

// fromYAML decodes YAML into a map, as Helm's fromYaml: a failure is
// reported under the key "Error", not as an error.
func fromYAML(s string) map[string]any {
	m := map[string]any{}
	if err := yaml.Unmarshal([]byte(s), &m); err != nil {
		m["Error"] = err.Error()
	}
	return m
}

// fromJSON decodes JSON into a map, as Helm's fromJson.
func fromJSON(s string) map[string]any {
	m := map[string]any{}
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		m["Error"] = err.Error()
	}
	return m
}

// ToJSON is toJson: v as JSON, HTML characters unescaped, without the
// final newline.
func ToJSON(v any) (string, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return "", fmt.Errorf("toJson: %w", err)
	}
	return strings.TrimSuffix(b.String(), "\n"), nil
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
