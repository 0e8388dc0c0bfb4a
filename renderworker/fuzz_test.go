package renderworker_test

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"runtime"
	"runtime/metrics"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/klog/v2"

	"stencil.dev/stencil/controller/reload"
	"stencil.dev/stencil/renderworker"
	"stencil.dev/stencil/templates"
	"stencil.dev/stencil/templates/engine"
)

// attacks are the hostile corpus's templates (test/hostile), by the value
// of spec.attack that picks each.
var attacks = []string{"toYaml", "toPrettyJson", "fromYaml", "anchors", "args", "deepList", "join", "printf", "uniq", "regex", "output"}

// namesBound is what a render that fails says: a bound of the budget, the
// output bound, or the wall's.
var namesBound = regexp.MustCompile(`renderBudget\.[a-zA-Z]+|output exceeds \d+ bytes, the bound|render worker killed: `)

var (
	shapesOnce sync.Once
	shapesSets map[string]*templates.Set
	shapesErr  error
)

// shapes loads the hostile corpus's config once, its sets rendering in a
// pool of two workers.
func shapes(t *testing.T) map[string]*templates.Set {
	shapesOnce.Do(func() {
		pool, err := renderworker.NewPool(renderworker.Options{Size: 2, Logger: klog.Background().V(4), MemoBytes: -1})
		if err != nil {
			shapesErr = err
			return
		}
		_, sets, err := reload.Source{Path: "../test/hostile/stencil.yaml", Wall: pool}.Load()
		if err != nil {
			shapesErr = err
			return
		}
		shapesSets = map[string]*templates.Set{}
		for _, s := range sets {
			shapesSets[s.Resource().Resource] = s
		}
	})
	if shapesErr != nil {
		t.Fatal(shapesErr)
	}
	return shapesSets
}

// FuzzWall renders the hostile corpus's templates through the wall with
// values in the shapes that amplify: nesting depth, YAML aliases (an
// anchor's size and its references), line width, list length, and
// numbers at every integer limit for each numeric argument. Each render
// ends within its deadline plus a second, renders or fails naming a bound
// (the budget's or the wall's), and the controller's own live heap (this
// process) never holds what a render built: measured while the render's
// result is still alive (what the controller decoded of it counts), it
// stays under 64 MiB above its start. make fuzz runs it; its seeds run in make test.
func FuzzWall(f *testing.F) {
	if !renderworker.Available() {
		f.Skip("render workers need Linux")
	}
	// One attack per input (which picks it), so that an input takes at
	// most one deadline: the fuzzing engine counts a long input as hung.
	type seed struct {
		depth  uint16
		width  uint32
		refs   uint16
		anchor uint32
		s      string
		n      int64
		items  uint16
	}
	seeds := []seed{
		{50, 100, 10, 100, "a", 3, 10},
		{5000, 2000, 2000, 5000, "(?:a|b){100}c", math.MaxInt64, 2000},
		{300, 20_000, 40_000, 20_000, "\n", math.MinInt64, 400},
		{9990, 1, 1, 1, "}}{{", -1, 1},
		{1, 1 << 18, 100, 1 << 18, strings.Repeat("x", 100), 1 << 31, 60000},
	}
	for i, sd := range seeds {
		for j := range attacks {
			if i > 0 && (i+j)%3 != 0 {
				continue // every attack with the first seed, a third with the others
			}
			f.Add(uint8(j), sd.depth, sd.width, sd.refs, sd.anchor, sd.s, sd.n, sd.items)
		}
	}
	f.Fuzz(func(t *testing.T, which uint8, depth uint16, width uint32, refs uint16, anchor uint32, s string, n int64, items uint16) {
		width %= 200_000
		anchor %= 200_000
		list := make([]any, items)
		for i := range list {
			list[i] = fmt.Sprint(s, i%13)
		}
		deep := map[string]any{"a": list}
		for range int(depth) - 1 {
			deep = map[string]any{"a": deep}
		}
		var deepList any = s
		for range depth {
			deepList = []any{deepList}
		}
		var doc strings.Builder
		fmt.Fprintf(&doc, "base: &x %q\nrefs:\n", strings.Repeat(s, int(min(anchor, 1<<20)/uint32(max(len(s), 1)))))
		for range refs {
			doc.WriteString("- *x\n")
		}
		envs := make([]any, min(int(items), 2000))
		for i := range envs {
			envs[i] = map[string]any{"name": fmt.Sprint("E", i), "value": s}
		}
		lists := make([]any, items)
		for i := range lists {
			lists[i] = []any{s, fmt.Sprint(i % 17)}
		}
		spec := map[string]any{
			"affinity": deep, "doc": doc.String(), "env": envs, "sidecars": make([]any, min(int(items), 2000)),
			"args": list, "script": strings.Repeat(s, int(width)/max(len(s), 1)), "deep": deepList,
			"sep": strings.Repeat(s, int(width)/max(len(s), 1)), "items": list, "width": n, "lists": lists,
			"pattern": s, "input": strings.Repeat("a", int(width)), "rows": make([]any, items), "pad": strings.Repeat(s, int(width)/max(len(s), 1)),
		}
		set := shapes(t)["attacks"]
		base := liveHeap()
		for _, a := range []string{attacks[int(which)%len(attacks)]} {
			spec["attack"] = a
			start := time.Now()
			r, err := set.RenderWith(probe("fuzz", spec), nil)
			took := time.Since(start)
			deadline := time.Duration(set.Budget().TimeoutSeconds)*time.Second + time.Second
			if took > deadline+startSlack {
				t.Fatalf("%s: took %v, over the deadline plus a second (%v): %v", a, took, deadline, err)
			}
			if err != nil {
				if errors.Is(err, templates.ErrWallDown) {
					t.Fatalf("%s: %v", a, err)
				}
				var re *engine.RenderError
				if !errors.As(err, &re) {
					t.Fatalf("%s: not a render error: %v", a, err)
				}
				// A template's own error (a value of the wrong type) is
				// fine; a bound must be named where one was hit.
				if strings.Contains(err.Error(), "exceeded") && !namesBound.MatchString(err.Error()) {
					t.Fatalf("%s: a bound hit but not named: %v", a, err)
				}
			}
			// Measured with the result alive: the decoded result is
			// what a render can make the controller hold.
			h := liveHeap()
			runtime.KeepAlive(r)
			if testing.Verbose() && h > base+8<<20 || h > base+64<<20 {
				t.Logf("%s: live heap %d MiB above its start with the result alive, %v: %.200v", a, (h-base)>>20, took, err)
			}
			if h > base+64<<20 {
				t.Fatalf("%s: the controller's live heap grew %d MiB with the render's result", a, (h-base)>>20)
			}
		}
	})
}

// startSlack is the time a worker takes to start (the config load) and
// read its request, which a render after a kill pays before its deadline
// starts; the race detector's build takes several times as long.
var startSlack = map[bool]time.Duration{false: 2 * time.Second, true: 15 * time.Second}[raceEnabled]

// liveHeap is this process's live heap after a collection.
func liveHeap() uint64 {
	runtime.GC()
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}
