package budget

import (
	"errors"
	"math"
	"math/big"
	"math/rand/v2"
	"testing"

	"github.com/Masterminds/sprig/v3"

	"stencil.dev/stencil/config"
)

// The int64 edges: every guard at and near math.MinInt64 and
// math.MaxInt64 either lets through a call whose result fits the budget
// or refuses it, never lets a wrapped-around size through. Each of these
// calls ran out of memory before the guards used saturating arithmetic
// (until of math.MinInt64: abs left it negative; untilStep whose counter
// wraps: (stop-start)/step said 2 items).
func TestGuardsAtTheIntegerEdges(t *testing.T) {
	const lo, hi = math.MinInt64, math.MaxInt64
	refused := []struct {
		name string
		args []any
	}{
		{"until", []any{lo}},
		{"until", []any{lo + 1}},
		{"until", []any{hi}},
		{"untilStep", []any{0, hi, hi/2 + 2}},           // the counter wraps after 2 items
		{"untilStep", []any{0, lo, lo/2 - 2}},           // the same downwards
		{"untilStep", []any{hi - 1, hi, hi}},            // one item, then the counter wraps
		{"untilStep", []any{lo + 1, lo, lo}},            // one item, then the counter wraps
		{"untilStep", []any{lo, hi, 1}},                 // 2^64-1 items
		{"untilStep", []any{hi, lo, -1}},                // the same downwards
		{"seq", []any{lo + 1}},                          // 1 down to math.MinInt64+1
		{"seq", []any{lo + 1, hi - 1}},                  //
		{"seq", []any{hi - 1, -1, lo + 1}},              //
		{"repeat", []any{hi, "ab"}},                     // 2*hi wraps
		{"repeat", []any{int64(1<<62 + 1), "abcd"}},     // 4*(2^62+1) wraps to 4
		{"indent", []any{lo, "a\nb"}},                   // |lo| is negative in Go
		{"indent", []any{int64(1 << 62), "a\nb\nc\nd"}}, // 6*2^62 wraps
		{"printf", []any{"%*d", lo, 1}},                 // a width of |lo|
	}
	for _, c := range refused {
		m := NewMeter(Limits(config.RenderBudget{}.WithDefaults()))
		if err := guards[c.name](&m, c.name, c.args); !errors.Is(err, ErrExceeded) {
			t.Errorf("%s%v: err = %v, want refused", c.name, c.args, err)
		}
	}
	// seq's end+1 wraps in sprig as in Go: these ask untilStep for
	// nothing, and sprig returns nothing.
	for _, args := range [][]any{{lo}, {lo, hi}, {hi, -1, lo}, {0, hi, hi}} {
		m := NewMeter(Limits(config.RenderBudget{}.WithDefaults()))
		if err := guards["seq"](&m, "seq", args); err != nil {
			t.Errorf("seq%v: %v, want allowed (sprig returns nothing)", args, err)
		}
		ints := make([]int, len(args))
		for i, a := range args {
			ints[i] = a.(int)
		}
		if out := sprig.TxtFuncMap()["seq"].(func(...int) string)(ints...); out != "" {
			t.Errorf("sprig's seq%v = %q, the test assumed nothing", args, out)
		}
	}
}

// stepCount agrees with sprig's own untilStep wherever that can run, and
// with exact arithmetic (math/big) at the edges: the count, and whether
// the counter wraps instead of reaching stop.
func TestStepCountIsExact(t *testing.T) {
	untilStep := sprig.TxtFuncMap()["untilStep"].(func(int, int, int) []int)
	r := rand.New(rand.NewPCG(1, 2))
	for range 20_000 {
		start, stop, step := r.Int64N(200)-100, r.Int64N(200)-100, r.Int64N(21)-10
		n, wraps := stepCount(start, stop, step)
		if want := len(untilStep(int(start), int(stop), int(step))); wraps || n != int64(want) {
			t.Fatalf("stepCount(%d, %d, %d) = %d, %v; sprig returns %d items", start, stop, step, n, wraps, want)
		}
	}
	edges := []int64{math.MinInt64, math.MinInt64 + 1, math.MinInt64 / 2, -3, -2, -1, 0, 1, 2, 3, math.MaxInt64 / 2, math.MaxInt64 - 1, math.MaxInt64}
	for _, start := range edges {
		for _, stop := range edges {
			for _, step := range edges {
				n, wraps := stepCount(start, stop, step)
				wantN, wantWraps := exactCount(start, stop, step)
				if n != wantN || wraps != wantWraps {
					t.Errorf("stepCount(%d, %d, %d) = %d, %v; want %d, %v", start, stop, step, n, wraps, wantN, wantWraps)
				}
			}
		}
	}
}

// exactCount is untilStep's item count and counter wrap with big integers.
func exactCount(start, stop, step int64) (int64, bool) {
	s, e, d := big.NewInt(start), big.NewInt(stop), big.NewInt(step)
	if !(stop > start && step > 0) && !(stop < start && step < 0) {
		return 0, false
	}
	dist := new(big.Int).Sub(e, s)
	dist.Abs(dist)
	size := new(big.Int).Abs(d)
	count, rem := new(big.Int).QuoRem(dist, size, new(big.Int))
	if rem.Sign() != 0 {
		count.Add(count, big.NewInt(1))
	}
	// The counter's value after the last item: start + count*step.
	next := new(big.Int).Add(s, new(big.Int).Mul(count, d))
	wraps := next.Cmp(big.NewInt(math.MaxInt64)) > 0 || next.Cmp(big.NewInt(math.MinInt64)) < 0
	if !count.IsInt64() {
		return math.MaxInt64, wraps
	}
	return count.Int64(), wraps
}

// A call costs what it reads: has over a 100,000-item list is 100,000
// steps, not one, so a loop of them stops within the budget's time; and
// the deliberately slow functions cost what they take.
func TestCallsCostTheirInputs(t *testing.T) {
	list := make([]any, 100_000)
	for i := range list {
		list[i] = "item"
	}
	for _, c := range []struct {
		name string
		args []any
		min  int64
	}{
		{"has", []any{"x", list}, 100_000},
		{"join", []any{",", list}, 100_000},
		{"fromYaml", []any{string(make([]byte, 1<<20))}, 1 << 19},
		{"b64enc", []any{string(make([]byte, 1<<20))}, 1 << 14},
		{"derivePassword", []any{uint32(1), "long", "pw", "user", "example.com"}, 400_000},
	} {
		m := NewMeter(Limits(config.RenderBudget{Steps: math.MaxInt64 / 2}.WithDefaults()))
		if err := m.Before(c.name, c.args...); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if m.Steps() < c.min {
			t.Errorf("%s costs %d steps, want at least %d", c.name, m.Steps(), c.min)
		}
	}
	// Through the wrapped function a template calls.
	m := NewMeter(Limits(config.RenderBudget{}.WithDefaults()))
	has := Wrap(sprig.TxtFuncMap(), &m, nil)["has"].(func(any, any) bool)
	calls := 0
	func() {
		defer func() { _ = recover() }()
		for range 1000 {
			has("x", list)
			calls++
		}
	}()
	if calls >= 1000 {
		t.Errorf("1000 calls of has over 100,000 items ran within the default budget")
	}
	t.Logf("has over 100,000 items: stopped after %d calls", calls)
}

// The deadline stops a render whose counts a template keeps low.
func TestDeadlineIsTheBackstop(t *testing.T) {
	m := NewMeter(Limits(config.RenderBudget{Steps: math.MaxInt64, TimeoutSeconds: 1}.WithDefaults()))
	var err error
	for i := 0; err == nil; i++ {
		err = m.Charge(0)
	}
	var be *Error
	if !errors.As(err, &be) || be.Bound != "timeoutSeconds" {
		t.Fatalf("err = %v, want the timeoutSeconds bound", err)
	}
}
