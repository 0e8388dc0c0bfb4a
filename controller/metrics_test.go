package controller

import (
	"runtime"
	"testing"
)

// TestBuildInfoAndLeader checks stencil_build_info and stencil_leader.
func TestBuildInfoAndLeader(t *testing.T) {
	m := NewMetrics()
	m.SetBuildInfo("v1.2.3")
	if got, want := gathered(t, m, "stencil_build_info"), map[string]float64{
		`go_version="` + runtime.Version() + `",version="v1.2.3"`: 1,
	}; len(got) != 1 || got[firstKey(want)] != 1 {
		t.Errorf("stencil_build_info = %v, want %v", got, want)
	}
	for _, leading := range []bool{false, true, false} {
		m.setLeader(leading)
		want := 0.0
		if leading {
			want = 1
		}
		if got := gathered(t, m, "stencil_leader"); got[""] != want || len(got) != 1 {
			t.Errorf("stencil_leader = %v after setLeader(%v), want %v", got, leading, want)
		}
	}
}

// gathered returns the series of metric name from m's registry, by their
// labels written name="value" joined with commas.
func gathered(t *testing.T, m *Metrics, name string) map[string]float64 {
	t.Helper()
	families, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, s := range f.GetMetric() {
			labels := ""
			for i, l := range s.GetLabel() {
				if i > 0 {
					labels += ","
				}
				labels += l.GetName() + `="` + l.GetValue() + `"`
			}
			out[labels] = s.GetGauge().GetValue()
		}
	}
	return out
}

func firstKey(m map[string]float64) string {
	for k := range m {
		return k
	}
	return ""
}
