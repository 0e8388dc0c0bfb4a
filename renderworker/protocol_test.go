package renderworker

import (
	"reflect"
	"testing"

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
