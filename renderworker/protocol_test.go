package renderworker

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"stencil.dev/stencil/config"
	"stencil.dev/stencil/templates/view"
)

// TestRequestCarriesReads: a request's frame carries the view's reads
// (objects, nothing, lists) with their types, and no reads as none.
func TestRequestCarriesReads(t *testing.T) {
	o := &view.Object{Name: "a", Namespace: "ns", Labels: map[string]string{}, Annotations: map[string]string{},
		Spec: map[string]any{"n": int64(1)}, Status: map[string]any{},
		Reads: map[string]any{
			"defaults": map[string]any{"data": map[string]any{"region": "eu\nwest", "n": int64(3), "f": 1.5}},
			"missing":  nil,
			"peers":    []any{map[string]any{"metadata": map[string]any{"name": "b"}}},
		}}
	for _, reads := range []map[string]any{o.Reads, nil} {
		o.Reads = reads
		pv, err := toWire(o)
		if err != nil {
			t.Fatal(err)
		}
		frame, err := requestFrame(request{GVR: "x", Parent: pv})
		if err != nil {
			t.Fatal(err)
		}
		req, err := parseRequest(frame)
		if err != nil {
			t.Fatal(err)
		}
		back, err := fromWire(req.Parent)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(back.Reads, reads) || !reflect.DeepEqual(back.Spec, o.Spec) {
			t.Errorf("reads %v came back as %v", reads, back.Reads)
		}
	}
}

// treeNodes counts the values of a decoded JSON value, as jsonNodes
// counts them in its text.
func treeNodes(v any) int64 {
	n := int64(1)
	switch x := v.(type) {
	case map[string]any:
		for _, e := range x {
			n += treeNodes(e)
		}
	case []any:
		for _, e := range x {
			n += treeNodes(e)
		}
	}
	return n
}

// TestJSONNodes: jsonNodes counts what decoding the text builds, strings
// with escapes, keys and nested empties included.
func TestJSONNodes(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
	}{
		{`{}`, 1}, {`[]`, 1}, {`"a"`, 1}, {`-1.5e3`, 1}, {`null`, 1},
		{`[{},{},{}]`, 4},
		{`{"a":1,"b":[true,false,null],"c":{"d":"x:y,\"[{"}}`, 8},
		{` { "k\\" : [ 1 , 2 ] } `, 4},
		{`[[[[[]]]]]`, 5},
	} {
		if got := jsonNodes([]byte(tc.in)); got != tc.want {
			t.Errorf("jsonNodes(%s) = %d, want %d", tc.in, got, tc.want)
		}
		v, err := decodeValue([]byte(tc.in))
		if err != nil {
			t.Fatal(err)
		}
		if got := treeNodes(v); got != tc.want {
			t.Errorf("the test's own count of %s is %d, want %d", tc.in, got, tc.want)
		}
	}
}

// FuzzJSONNodes: for any bytes jsonNodes ends without reading past them,
// and for valid JSON it counts exactly what decoding builds.
func FuzzJSONNodes(f *testing.F) {
	for _, s := range []string{`{}`, `[{},{}]`, `{"a":"\"","b":[1,-2.5e-3,true]}`, `"\\"`, `[[[[`, `{"a":`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		n := jsonNodes(b)
		v, err := decodeValue(b)
		if err != nil {
			return
		}
		if want := treeNodes(v); n != want {
			t.Fatalf("jsonNodes(%q) = %d, decoding builds %d", b, n, want)
		}
	})
}

// TestResultNodesFitRealCharts: the default renderBudget.resultNodes is at
// least ten times the values of the largest render of the charts the
// project vendors (bitnami nginx, podinfo, helm create's), each with every
// value set of the chart tests: the bound stops output no real chart makes.
func TestResultNodesFitRealCharts(t *testing.T) {
	goldens, err := filepath.Glob("../templates/chart/testdata/golden/*.yaml")
	if err != nil || len(goldens) == 0 {
		t.Fatalf("no chart goldens: %v", err)
	}
	largest, which := int64(0), ""
	for _, g := range goldens {
		data, err := os.ReadFile(g)
		if err != nil {
			t.Fatal(err)
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
		n := int64(0)
		for {
			var obj map[string]any
			if err := dec.Decode(&obj); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatalf("%s: %v", g, err)
			}
			if obj == nil {
				continue
			}
			b, err := encodeValue(toUnstructured(t, obj))
			if err != nil {
				t.Fatal(err)
			}
			n += jsonNodes(b)
		}
		if n > largest {
			largest, which = n, filepath.Base(g)
		}
	}
	bound := config.DefaultRenderBudget.ResultNodes
	t.Logf("largest chart render: %s, %d values; renderBudget.resultNodes default %d (%.0fx)", which, largest, bound, float64(bound)/float64(largest))
	if 10*largest > bound {
		t.Errorf("%s renders %d values: the default resultNodes %d is less than ten times that", which, largest, bound)
	}
}

// toUnstructured turns a decoded YAML document into unstructured types.
func toUnstructured(t *testing.T, obj map[string]any) map[string]any {
	t.Helper()
	b, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	m, err := decodeMap(b)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// FuzzEncodeString: appendString writes every string as a JSON string
// that decodes to what json.Marshal's does (the fast path for plain
// ASCII, json.Marshal for the rest: quotes, escapes, control bytes,
// invalid UTF-8, U+2028).
func FuzzEncodeString(f *testing.F) {
	for _, s := range []string{"", "plain", `q"uote`, `back\slash`, "nl\n", "\x00", "<&>", "é", "\xff", "\u2028", "\x7f"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var buf bytes.Buffer
		if err := appendString(&buf, s); err != nil {
			t.Fatal(err)
		}
		ref, _ := json.Marshal(s)
		var got, want string
		if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
			t.Fatalf("%q encodes as %s, not JSON: %v", s, buf.Bytes(), err)
		}
		if err := json.Unmarshal(ref, &want); err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Fatalf("%q decodes as %q, json.Marshal's as %q", s, got, want)
		}
	})
}

// TestEncodeResult: encodeResult writes what json.Marshal writes, field
// for field, with and without children, status and the other fields.
func TestEncodeResult(t *testing.T) {
	child, _ := encodeValue(map[string]any{"kind": "Service", "n": int64(1), "f": 2.0})
	status, _ := encodeValue(map[string]any{"ready": true})
	for _, res := range []result{
		{},
		{Retire: true},
		{Children: []json.RawMessage{child}},
		{Children: []json.RawMessage{child, child}, Status: status, Hooks: []string{"h"}, Notes: "n"},
		{Status: status},
		{Status: status, StatusWaits: true},
		{Errors: []wireError{{Message: "m", Budget: true}}},
	} {
		got, err := encodeResult(res)
		if err != nil {
			t.Fatal(err)
		}
		want, err := json.Marshal(res)
		if err != nil {
			t.Fatal(err)
		}
		var g, w result
		if err := json.Unmarshal(got, &g); err != nil {
			t.Fatalf("%+v encodes as %s, not JSON: %v", res, got, err)
		}
		if err := json.Unmarshal(want, &w); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(g, w) {
			t.Errorf("encodeResult(%+v) = %s, json.Marshal = %s", res, got, want)
		}
	}
}
