package funcs

import (
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"testing"
	"text/template"

	"github.com/Masterminds/sprig/v3"
)

func TestEveryMapOrderFunctionHasASortedStandIn(t *testing.T) {
	for _, name := range Named(MapOrder) {
		if ordered[name] == nil {
			t.Errorf("%s is classed MapOrder but has no sorted stand-in in ordered: both modes would bind nil", name)
		}
	}
	for name := range ordered {
		if !Is(name, MapOrder) {
			t.Errorf("ordered has a stand-in for %s, which the policy table does not class MapOrder: Ordered never binds it", name)
		}
	}
	for _, m := range []template.FuncMap{Hermetic(), Ordered(sprig.TxtFuncMap())} {
		for _, name := range Named(MapOrder) {
			if reflect.ValueOf(m[name]).Pointer() != reflect.ValueOf(ordered[name]).Pointer() {
				t.Errorf("%s is not the sorted stand-in in a bound table", name)
			}
		}
	}
}

func TestKeysAndValuesSorted(t *testing.T) {
	data := map[string]any{
		"a":     map[string]any{"zeta": 1, "alpha": 2, "mid": 3, "Beta": 4},
		"b":     map[string]any{"y": "Y", "x": "X"},
		"empty": map[string]any{},
	}
	tests := []struct{ text, want string }{
		{`{{ keys .a | join "," }}`, "Beta,alpha,mid,zeta"},
		{`{{ values .a | join "," }}`, "4,2,3,1"},
		// Each map's keys sorted, the lists in argument order, as sprig
		// joins them: b's before a's.
		{`{{ keys .b .a | join "," }}`, "x,y,Beta,alpha,mid,zeta"},
		{`{{ keys .empty }} {{ values .empty }} {{ keys }}`, "[] [] []"},
		{`{{ range $i, $k := keys .a }}{{ if $i }},{{ end }}{{ $k }}={{ index $.a $k }}{{ end }}`, "Beta=4,alpha=2,mid=3,zeta=1"},
	}
	for _, tt := range tests {
		got, err := run(t, tt.text, data)
		if err != nil || got != tt.want {
			t.Errorf("%s = %q, %v; want %q", tt.text, got, err, tt.want)
		}
	}
}

// manyKeys returns a fresh map of n keys (a function may change the map
// it is given: set, unset, merge).
func manyKeys(n int) map[string]any {
	m := make(map[string]any, n)
	for i := range n {
		m[fmt.Sprintf("k%02d", i)] = fmt.Sprintf("v%02d", i)
	}
	return m
}

// callWith calls fn with arguments of its parameter types: a fresh
// n-key map for a map or an interface, "k07" for a string, 2 for a
// number, true for a bool, two of these for a slice or a variadic
// parameter. ok is false when fn takes a parameter of another type; it
// reports whether fn takes a map (or a value of any type) at all.
func callWith(fn any, n int) (out string, ok, takesMap bool) {
	ft := reflect.TypeOf(fn)
	var arg func(reflect.Type) (reflect.Value, bool)
	arg = func(pt reflect.Type) (reflect.Value, bool) {
		switch pt.Kind() {
		case reflect.Map, reflect.Interface:
			takesMap = true
			m := reflect.ValueOf(manyKeys(n))
			if !m.Type().AssignableTo(pt) {
				return reflect.Value{}, false
			}
			return m, true
		case reflect.String:
			return reflect.ValueOf("k07").Convert(pt), true
		case reflect.Int, reflect.Int64, reflect.Float64:
			return reflect.ValueOf(2).Convert(pt), true
		case reflect.Bool:
			return reflect.ValueOf(true), true
		case reflect.Slice:
			s := reflect.MakeSlice(pt, 0, 2)
			for range 2 {
				e, ok := arg(pt.Elem())
				if !ok {
					return reflect.Value{}, false
				}
				s = reflect.Append(s, e)
			}
			return s, true
		}
		return reflect.Value{}, false
	}
	var in []reflect.Value
	for i := range ft.NumIn() {
		pt := ft.In(i)
		if ft.IsVariadic() && i == ft.NumIn()-1 {
			for range 2 {
				v, ok := arg(pt.Elem())
				if !ok {
					return "", false, takesMap
				}
				in = append(in, v)
			}
			continue
		}
		v, ok := arg(pt)
		if !ok {
			return "", false, takesMap
		}
		in = append(in, v)
	}
	ok = true // a panic returns the results as they stand
	defer func() {
		if r := recover(); r != nil {
			out = fmt.Sprint("panic: ", r)
		}
	}()
	for _, r := range reflect.ValueOf(fn).Call(in) {
		if err, isErr := r.Interface().(error); isErr {
			out += "error: " + err.Error() + "\n"
			continue
		}
		// %#v prints a map's keys sorted and a list in its order: what
		// differs between calls is an order the function chose.
		out += fmt.Sprintf("%#v\n", r.Interface())
	}
	return out, true, takesMap
}

// unorderedCalls returns, for the functions of m that take a map, those
// whose result differs between calls with 10-key and 50-key maps (Go
// draws a map's iteration order afresh on every range over it), and the
// functions that take a map but that callWith could not call.
func unorderedCalls(m template.FuncMap, calls int) (unordered, uncalled []string) {
	for _, name := range slices.Sorted(maps.Keys(m)) {
		for _, n := range []int{10, 50} {
			first, ok, takesMap := callWith(m[name], n)
			if !takesMap {
				break
			}
			if !ok {
				uncalled = append(uncalled, name)
				break
			}
			differs := false
			for range calls - 1 {
				if next, _, _ := callWith(m[name], n); next != first {
					differs = true
					break
				}
			}
			if differs {
				unordered = append(unordered, name)
				break
			}
		}
	}
	return unordered, uncalled
}

// Every function either mode binds from sprig or stencil that takes a
// map gives the same result on every call: none follows Go's map order.
// (Helm's own are serialisers, which sort; chart's tests render them.)
// Left out: what is unrepeatable by design (refused in chart mode, absent
// from own templates), and what reads the environment or the network,
// which chart mode does not bind as sprig's.
func TestNoFunctionFollowsMapOrder(t *testing.T) {
	sp := Ordered(sprig.TxtFuncMap())
	for _, name := range Named(unrepeatable | Environment | Network) {
		delete(sp, name)
	}
	for mode, m := range map[string]template.FuncMap{"own templates": Hermetic(), "chart mode (sprig's)": sp} {
		unordered, uncalled := unorderedCalls(m, 20)
		for _, name := range unordered {
			t.Errorf("%s: %s gives a different result on calls with the same map: it follows Go's map order; class it MapOrder and give it a sorted stand-in", mode, name)
		}
		for _, name := range uncalled {
			t.Errorf("%s: %s takes a map, but the test cannot call it: teach callWith its parameter types", mode, name)
		}
	}
}

// The detector sees an order that varies: sprig's own keys and values
// are what the stand-ins replace.
func TestDetectorSeesSprigsOrder(t *testing.T) {
	raw := sprig.TxtFuncMap()
	unordered, _ := unorderedCalls(template.FuncMap{"keys": raw["keys"], "values": raw["values"]}, 100)
	if !slices.Equal(unordered, []string{"keys", "values"}) {
		t.Errorf("unordered = %v, want [keys values]: either sprig sorts them now (then the stand-ins can go) or the detector is blind",
			unordered)
	}
	if _, _, takesMap := callWith(func(int) {}, 1); takesMap {
		t.Error("callWith says func(int) takes a map")
	}
	if out, _, _ := callWith(func(any) error { return errors.New("x") }, 1); out != "error: x\n" {
		t.Errorf("callWith's error = %q", out)
	}
}
