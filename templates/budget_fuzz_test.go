package templates

import (
	"math"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"stencil.dev/stencil/config"
	"stencil.dev/stencil/templates/budget"
)

// budgetAmplifiers are plausible templates that turn a tenant's numbers,
// strings and lists into work: every one the budget's guards know, and the
// shapes around them (nested range, range over an integer, doubling).
var budgetAmplifiers = map[string]string{
	"until.tmpl":       `{{ range until (int .Spec.a) }}x{{ end }}`,
	"untilStep.tmpl":   `{{ range untilStep (int .Spec.a) (int .Spec.b) (int .Spec.c) }}{{ . }}{{ end }}`,
	"seq.tmpl":         `{{ seq (int .Spec.a) (int .Spec.c) (int .Spec.b) }}{{ seq (int .Spec.a) }}{{ seq (int .Spec.a) (int .Spec.b) }}`,
	"repeat.tmpl":      `{{ repeat (int .Spec.a) .Spec.s }}`,
	"printf.tmpl":      `{{ printf "%*d" (int .Spec.a) 1 }}{{ printf (print "%0" .Spec.b "d") 1 }}{{ printf "%.*f" (int .Spec.c) .Spec.f }}`,
	"indent.tmpl":      `{{ indent (int .Spec.a) .Spec.s }}{{ nindent (int .Spec.b) (join "\n" .Spec.list) }}`,
	"nested.tmpl":      `{{ range .Spec.list }}{{ range $.Spec.list }}{{ range $.Spec.list }}{{ end }}{{ end }}{{ end }}`,
	"rangeInt.tmpl":    `{{ range (int .Spec.a) }}{{ end }}`,
	"has.tmpl":         `{{ range .Spec.list }}{{ if has . $.Spec.list }}{{ end }}{{ end }}`,
	"doubling.tmpl":    `{{ $x := list .Spec.s }}{{ range until (int .Spec.c) }}{{ $x = list $x $x }}{{ end }}{{ toJson $x }}`,
	"strings.tmpl":     `{{ $s := .Spec.s }}{{ range until (int .Spec.c) }}{{ $s = cat $s $s }}{{ end }}{{ b64enc $s | sha256sum }}{{ replace "a" $s $s }}{{ wrapWith (int .Spec.b) $s $s }}`,
	"yaml.tmpl":        `{{ range .Spec.list }}{{ $_ := fromYaml $.Spec.s }}{{ $_ := toYaml $.Spec.list }}{{ end }}`,
	"budget.yaml.tmpl": "", // test/integration/testdata/budget: the fault suite's own
}

var (
	amplifierOnce sync.Once
	amplifierSets map[string]*Set
)

// loadAmplifiers loads each amplifier as an entry of its own (a render
// stopped by one does not hide the others), once per process.
func loadAmplifiers(t *testing.T, limits budget.Limits) map[string]*Set {
	amplifierOnce.Do(func() {
		amplifierSets = map[string]*Set{}
		for name, text := range budgetAmplifiers {
			if text == "" {
				b, err := os.ReadFile(filepath.Join("..", "test", "integration", "testdata", "budget", name))
				if err != nil {
					t.Fatal(err)
				}
				text = string(b)
			} else {
				text += "\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n"
			}
			set := loadSet(t, Options{AllowedKinds: configMapKinds}, name, text)
			set.budget = limits
			amplifierSets[name] = set
		}
	})
	return amplifierSets
}

// intEdges are the numbers at and near every integer limit a Go or YAML
// number has.
var intEdges = []int64{math.MinInt64, math.MinInt64 + 1, math.MinInt32, -1 << 31, -100_000_001, -1, 0, 1, 2, 63, 64, 100_001,
	math.MaxInt32, 1 << 31, 1 << 32, 1<<62 + 1, math.MaxInt64 / 2, math.MaxInt64 - 1, math.MaxInt64}

// fuzzBudget is the budget the fuzz targets render under: the default
// under make fuzz (STENCIL_FUZZ_BUDGET=default), and a tenth of its steps
// and a second of time when the seed corpus runs in make test, under the
// race detector: the property (a render ends within its budget's time or
// fails naming a bound) holds for every budget, and the guards on sizes
// are the same.
func fuzzBudget() budget.Limits {
	b := budget.Limits(config.RenderBudget{}.WithDefaults())
	if os.Getenv("STENCIL_FUZZ_BUDGET") != "default" {
		b.Steps, b.TimeoutSeconds = b.Steps/10, 1
	}
	return b
}

// FuzzRenderBudget renders the amplifiers and the shipped examples with
// fuzzed spec values (numbers at and near every integer limit, negative,
// float, long strings and lists): each render ends within the budget's
// time and allocates under 256 MiB, or fails naming a bound. Run it with
// make fuzz; the seed corpus runs in make test.
func FuzzRenderBudget(f *testing.F) {
	for i, a := range intEdges {
		b, c := intEdges[(i+5)%len(intEdges)], intEdges[(i+11)%len(intEdges)]
		f.Add(a, b, c, float64(a)*1.5, "ab\n", uint16(i*50))
	}
	f.Add(int64(-9223372036854775808), int64(0), int64(3), math.Inf(-1), "x", uint16(500))
	f.Add(int64(0), int64(math.MaxInt64), int64(math.MaxInt64/2+2), math.NaN(), "", uint16(0))
	f.Add(int64(50), int64(1), int64(30), 1e308, strings.Repeat("a: [b, c]\n", 100), uint16(2000))
	examples := exampleSets(f)
	budget := fuzzBudget()
	f.Fuzz(func(t *testing.T, a, b, c int64, fl float64, s string, n uint16) {
		list := make([]any, n)
		for i := range list {
			list[i] = s + strconv.Itoa(i%7)
		}
		num := strconv.FormatInt(a, 10)
		spec := map[string]any{"a": a, "b": b, "c": c, "f": fl, "s": s, "list": list,
			// The examples' fields, the fault suite's config among them.
			"image": s, "replicas": a, "port": b, "size": c, "hosts": list,
			"config": map[string]any{"shards": num, "width": strconv.FormatInt(b, 10), "hosts": strings.Repeat(s+",", int(n)%2000)}}
		sets := loadAmplifiers(t, budget)
		for name, set := range sets {
			checkBoundedRender(t, name, set, spec, budget)
		}
		for name, set := range examples {
			set.budget = budget
			checkBoundedRender(t, name, set, spec, budget)
		}
	})
}

// checkBoundedRender renders spec with set: the render ends within the
// budget's time (and a second of slack) and allocates under 256 MiB, and a
// failure is a render error (a bound named, or the template's own), never
// a panic.
func checkBoundedRender(t *testing.T, name string, set *Set, spec map[string]any, limits budget.Limits) {
	t.Helper()
	p := parent()
	p.Spec = spec
	var err error
	start := time.Now()
	peak := peakHeap(func() { _, err = set.RenderWith(p, nil) })
	took := time.Since(start)
	slack := time.Second
	if raceEnabled {
		slack = 5 * time.Second
	}
	if took > time.Duration(limits.TimeoutSeconds)*time.Second+slack {
		t.Fatalf("%s: render took %s, over the budget's %ds: %v", name, took, limits.TimeoutSeconds, err)
	}
	if peak > 256<<20 {
		t.Fatalf("%s: render's live heap peaked %d MiB over its start: %v", name, peak>>20, err)
	}
	if err != nil {
		// Every failure a render error (FuzzRender's check), and none a
		// panic turned into one.
		checkRenderErrors(t, err)
		if strings.Contains(err.Error(), "panicked") {
			t.Fatalf("%s: %v", name, err)
		}
	}
}

// peakHeap runs f and returns how far the live heap rose above its level
// at the start, sampled every millisecond (runtime/metrics reads it
// without stopping the world): the memory one render holds at once, which
// is what a pod's limit sees, where the bytes allocated over a render
// count garbage the collector already returned.
func peakHeap(f func()) uint64 {
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	read := func() uint64 {
		metrics.Read(sample)
		return sample[0].Value.Uint64()
	}
	runtime.GC()
	base := read()
	var peak atomic.Uint64
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			if v := read(); v > base && v-base > peak.Load() {
				peak.Store(v - base)
			}
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	}()
	f()
	close(done)
	wg.Wait()
	if v := read(); v > base && v-base > peak.Load() {
		peak.Store(v - base)
	}
	return peak.Load()
}
