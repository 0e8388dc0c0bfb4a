package rollout

import (
	"fmt"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"stencil.dev/stencil/config"
)

func rolloutKey(i int) types.NamespacedName {
	return types.NamespacedName{Namespace: "team", Name: fmt.Sprintf("wa-%02d", i)}
}

func rolloutLimits(inFlight, failed intstr.IntOrString) *config.Rollout {
	return &config.Rollout{MaxInFlight: &inFlight, MaxFailed: &failed}
}

// admitted lists, in key order, the keys of n that admit lets through.
func admitted(r *Tracker, n int) []int {
	var out []int
	for i := range n {
		if r.Admit(rolloutKey(i)) {
			out = append(out, i)
		}
	}
	return out
}

func keyIndexes(keys []types.NamespacedName) []int {
	var out []int
	for _, k := range keys {
		var i int
		fmt.Sscanf(k.Name, "wa-%02d", &i)
		out = append(out, i)
	}
	return out
}

// TestRolloutStateMachine walks one entry of 20 resources through a bad
// change (maxInFlight 3, maxFailed 1), a restart while halted, a revert,
// a resource deleted mid-rollout and a good change.
func TestRolloutStateMachine(t *testing.T) {
	limits := rolloutLimits(intstr.FromInt32(3), intstr.FromInt32(1))
	all := func(st State) map[types.NamespacedName]State {
		m := map[types.NamespacedName]State{}
		for i := range 20 {
			m[rolloutKey(i)] = st
		}
		return m
	}

	// A bad change: every resource is on the old revision.
	r := Start("bad", limits, all(Pending), nil)
	if got := admitted(r, 20); !slices.Equal(got, []int{0, 1, 2}) {
		t.Fatalf("first pass admitted %v, want [0 1 2]", got)
	}
	if got := r.Next(); len(got) != 0 {
		t.Fatalf("next with no free slot = %v, want none", keyIndexes(got))
	}
	// The caches lag behind the move: a moved resource still shows its
	// old children and must not count as pending again.
	if st := r.Observe(rolloutKey(0), Pending); st != Rolling {
		t.Fatalf("a moved resource seen with old children is %s, want rolling", st)
	}
	// Resource 0 gets Ready: its slot goes to the first pending one.
	r.Observe(rolloutKey(0), Done)
	if got := keyIndexes(r.Next()); !slices.Equal(got, []int{3}) {
		t.Fatalf("next after one done = %v, want [3]", got)
	}
	if !r.Admit(rolloutKey(3)) || r.Admit(rolloutKey(4)) {
		t.Fatal("want 3 admitted into the free slot and 4 refused")
	}
	// Resource 1 fails: the rollout halts, nothing else moves.
	r.Observe(rolloutKey(1), Failed)
	if !r.Halted() {
		t.Fatal("one failure with maxFailed 1 did not halt the rollout")
	}
	r.Observe(rolloutKey(2), Done)
	if got := admitted(r, 20); !slices.Equal(got, []int{0, 1, 2, 3}) {
		t.Fatalf("while halted admitted %v, want only the moved ones [0 1 2 3]", got)
	}
	if got := r.Next(); len(got) != 0 {
		t.Fatalf("next while halted = %v, want none", keyIndexes(got))
	}
	if n := r.counts[Pending]; n != 16 {
		t.Fatalf("pending = %d, want 16", n)
	}

	// A restart reads the same state back from the caches: still halted.
	restart := all(Pending)
	restart[rolloutKey(0)], restart[rolloutKey(1)], restart[rolloutKey(2)], restart[rolloutKey(3)] =
		Done, Failed, Done, Rolling
	r = Start("bad", limits, restart, nil)
	if !r.Halted() || len(admitted(r, 20)) != 4 || len(r.Next()) != 0 {
		t.Fatalf("after a restart: halted %v, admitted %v, next %v; want halted, only the 4 moved, none woken",
			r.Halted(), admitted(r, 20), keyIndexes(r.Next()))
	}

	// A revert: the 16 that never moved are on the reverted revision
	// already; the 4 that moved are pending, and the failed one goes first.
	revert := all(Done)
	for i := range 4 {
		revert[rolloutKey(i)] = Pending
	}
	r = Start("good", limits, revert, map[types.NamespacedName]bool{rolloutKey(1): true})
	if r.Halted() {
		t.Fatal("a new rollout starts halted")
	}
	if got := keyIndexes(r.Next()); !slices.Equal(got, []int{1, 0, 2}) {
		t.Fatalf("woken first = %v, want the failed one first: [1 0 2]", got)
	}
	if r.Admit(rolloutKey(0)) {
		t.Fatal("0 moved before 1, which failed on the old revision")
	}
	if !r.Admit(rolloutKey(1)) || !r.Admit(rolloutKey(0)) || !r.Admit(rolloutKey(2)) || r.Admit(rolloutKey(3)) {
		t.Fatal("want 1, then 0 and 2 admitted, and 3 refused (3 in flight)")
	}
	// Resource 0 is deleted mid-rollout: its slot frees.
	r.Forget(rolloutKey(0))
	if got := keyIndexes(r.Next()); !slices.Equal(got, []int{3}) {
		t.Fatalf("next after a delete = %v, want [3]", got)
	}
	// A resource created meanwhile has no children: not pending, it renders at once.
	r.Observe(rolloutKey(30), NoChildren)
	if !r.Admit(rolloutKey(30)) {
		t.Fatal("a new resource waited for a slot")
	}
	for _, i := range []int{1, 2} {
		r.Observe(rolloutKey(i), Done)
	}
	if !r.Admit(rolloutKey(3)) {
		t.Fatal("3 refused with 2 slots free")
	}
	r.Observe(rolloutKey(3), Done)
	if r.counts[Pending] != 0 || r.InFlight() != 0 || r.counts[Done] != 19 {
		t.Fatalf("at the end: %v (new, pending, rolling, done, failed), want 19 done", r.counts)
	}
}

// TestRolloutNeverMoreThanMaxInFlight admits and completes resources in
// random-looking orders and checks the bound after every step.
func TestRolloutNeverMoreThanMaxInFlight(t *testing.T) {
	for _, tt := range []struct {
		inFlight intstr.IntOrString
		n, want  int
	}{
		{intstr.FromInt32(3), 20, 3}, {intstr.FromString("25%"), 20, 5}, {intstr.FromString("1%"), 20, 1},
	} {
		states := map[types.NamespacedName]State{}
		for i := range tt.n {
			states[rolloutKey(i)] = Pending
		}
		r := Start("rev", rolloutLimits(tt.inFlight, intstr.FromInt32(1)), states, nil)
		peak, steps := 0, 0
		for r.counts[Done] < tt.n && steps < 10*tt.n {
			steps++
			for i := tt.n - 1; i >= 0; i-- {
				r.Admit(rolloutKey((i * 7) % tt.n))
				peak = max(peak, r.InFlight())
			}
			// Complete the moved ones with an odd index first.
			for i := range tt.n {
				if k := rolloutKey(i); r.states[k] == Rolling && (i%2 == 1 || steps%2 == 0) {
					r.Observe(k, Done)
				}
			}
		}
		if r.counts[Done] != tt.n || peak != tt.want {
			t.Errorf("maxInFlight %s of %d: %d done, peak %d in flight; want all done, peak %d", tt.inFlight.String(), tt.n, r.counts[Done], peak, tt.want)
		}
	}
}

// TestRolloutConfigChangeMidRollout: a second change while the first is
// still moving (5 done, 3 rolling, 12 not moved) starts a new rollout in
// which all 20 are pending (none carries the new revision), bounded the
// same way, and nothing halts it that failed on neither revision.
func TestRolloutConfigChangeMidRollout(t *testing.T) {
	limits := rolloutLimits(intstr.FromInt32(3), intstr.FromInt32(1))
	states := map[types.NamespacedName]State{}
	for i := range 20 {
		states[rolloutKey(i)] = Pending
	}
	first := Start("rev1", limits, states, nil)
	for i := range 8 {
		first.set(rolloutKey(i), Rolling)
	}
	for i := range 5 {
		first.Observe(rolloutKey(i), Done)
	}
	if first.InFlight() != 3 || first.counts[Done] != 5 {
		t.Fatalf("setup: %v", first.counts)
	}

	// What the caches say under rev2: every resource's children carry rev1
	// or the revision before it, so all 20 are pending.
	second := Start("rev2", limits, states, nil)
	if second.counts[Pending] != 20 || second.Halted() {
		t.Fatalf("rev2 starts with %v (new, pending, rolling, done, failed), halted %v; want 20 pending", second.counts, second.Halted())
	}
	if got := admitted(second, 20); !slices.Equal(got, []int{0, 1, 2}) {
		t.Fatalf("rev2 admitted %v, want [0 1 2]", got)
	}
	for i := range 3 {
		second.Observe(rolloutKey(i), Done)
	}
	if got := keyIndexes(second.Next()); !slices.Equal(got, []int{3, 4, 5}) {
		t.Fatalf("rev2 next = %v, want [3 4 5]", got)
	}
}
