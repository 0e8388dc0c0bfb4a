package fieldpath

import (
	"reflect"
	"testing"
)

func TestValue(t *testing.T) {
	obj := map[string]any{"status": map[string]any{"loadBalancer": map[string]any{"ingress": []any{map[string]any{"ip": "10.0.0.1"}}}}}
	for _, tc := range []struct {
		path string
		want any
		ok   bool
	}{
		{"status.loadBalancer.ingress[0].ip", "10.0.0.1", true},
		{"status.loadBalancer.ingress[1].ip", nil, false},
		{"status.loadBalancer.ingress.ip", nil, false},
		{"status.missing", nil, false},
		{"status.loadBalancer.ingress[x]", nil, false},
		{"", nil, false},
	} {
		got, ok := Value(obj, tc.path)
		if ok != tc.ok || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("Value(%q) = %v, %v; want %v, %v", tc.path, got, ok, tc.want, tc.ok)
		}
	}
}

func TestParseRefuses(t *testing.T) {
	for _, path := range []string{"", "a..b", "a[-1]", "a[1", "a[1]b", ".a"} {
		if steps, err := Parse(path); err == nil {
			t.Errorf("Parse(%q) = %v, want an error", path, steps)
		}
	}
	steps, err := Parse("a.b[2][3]")
	want := []Step{{Field: "a", Index: -1}, {Field: "b", Index: -1}, {Index: 2}, {Index: 3}}
	if err != nil || !reflect.DeepEqual(steps, want) {
		t.Errorf("Parse(a.b[2][3]) = %v, %v; want %v", steps, err, want)
	}
}
