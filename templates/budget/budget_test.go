package budget

import (
	"errors"
	"testing"

	"stencil.dev/stencil/config"
)

// TestMeterStopsAtEachBound: each bound fails with an Error naming it, and
// every Error is ErrExceeded to errors.Is.
func TestMeterStopsAtEachBound(t *testing.T) {
	limits := Limits(config.RenderBudget{Steps: 10, StringBytes: 100, ListItems: 5, IncludeDepth: 3})
	m := NewMeter(limits)
	if err := m.Charge(10); err != nil {
		t.Fatalf("10 steps of 10: %v", err)
	}
	for _, tc := range []struct {
		bound string
		err   error
	}{
		{"steps", m.Charge(1)},
		{"listItems", m.Items("until", 6)},
		{"stringBytes", m.Text("repeat", 101)},
	} {
		var be *Error
		if !errors.As(tc.err, &be) || be.Bound != tc.bound || !errors.Is(tc.err, ErrExceeded) {
			t.Errorf("%s: err = %v, want a budget Error of that bound", tc.bound, tc.err)
		}
	}
	m.Reset()
	if m.Steps() != 0 || m.Charge(1) != nil {
		t.Error("Reset did not start the count again")
	}
}

// TestMeasuredCountsSharedPartsAsOftenAsTheyAreWritten: a list that holds
// itself twice per level, 30 levels deep, is 2^30 items once written out:
// measured before the call, it fails at once, without the walk running
// away.
func TestMeasuredCountsSharedPartsAsOftenAsTheyAreWritten(t *testing.T) {
	m := NewMeter(Limits(config.RenderBudget{Steps: 1 << 40, StringBytes: 1 << 20, ListItems: 1 << 20, IncludeDepth: 3}))
	v := any("x")
	for range 30 {
		v = []any{v, v}
	}
	if err := m.Measured("toYaml", v); !errors.Is(err, ErrExceeded) {
		t.Fatalf("Measured(2^30 shared items) = %v, want the budget exceeded", err)
	}
	if err := m.Measured("toYaml", []any{"a", "b"}); err != nil {
		t.Errorf("Measured(a small list) = %v", err)
	}
}
