package renderworker_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"k8s.io/klog/v2"

	"stencil.dev/stencil/config"
	"stencil.dev/stencil/controller/reload"
	"stencil.dev/stencil/renderworker"
	"stencil.dev/stencil/templates"
	"stencil.dev/stencil/templates/view"
)

// twoWorkers is the example config and the hostile corpus, each loaded
// into two pools of one worker: two processes, each with its own map seeds
// and its own compile.
type twoWorkers struct {
	entries []config.Resource
	a, b    []*templates.Set
}

var (
	twoOnce sync.Once
	two     *twoWorkers
	twoErr  error
)

func loadTwoWorkers() (*twoWorkers, error) {
	twoOnce.Do(func() {
		tw := &twoWorkers{}
		for _, path := range []string{"../crds/stencil.yaml", "../test/hostile/stencil.yaml"} {
			var loaded [2][]*templates.Set
			var conf *config.Config
			for i := range loaded {
				pool, err := renderworker.NewPool(renderworker.Options{Size: 1, Logger: klog.Background(), MemoBytes: -1})
				if err != nil {
					twoErr = err
					return
				}
				c, sets, err := reload.Source{Path: path, Wall: pool}.Load()
				if err != nil {
					twoErr = fmt.Errorf("%s: %w", path, err)
					return
				}
				conf, loaded[i] = c, sets
			}
			tw.entries = append(tw.entries, conf.Resources...)
			tw.a, tw.b = append(tw.a, loaded[0]...), append(tw.b, loaded[1]...)
		}
		two = tw
	})
	return two, twoErr
}

// FuzzSameInTwoWorkers renders a random spec with an entry of the example
// config or of the hostile corpus (picked by the input) in two render
// worker processes, and compares the bytes: a render is a function of the
// resource alone, not of the process (map seeds, compile order, what the
// worker rendered before). Both may fail, with the same message; a
// failure of one alone is allowed only when it is the wall's deadline,
// which is wall-clock time.
func FuzzSameInTwoWorkers(f *testing.F) {
	if !renderworker.Available() {
		f.Skip("render workers need Linux")
	}
	f.Add(uint8(0), uint8(10), "nginx:1.27", int64(3), `{"port": 8080}`)
	f.Add(uint8(1), uint8(30), "memcached", int64(2), `{}`)
	f.Add(uint8(3), uint8(12), "hello", int64(1), `{"greeting": "hi", "config": {"enabled": true}}`)
	f.Add(uint8(4), uint8(5), "}}{{", int64(-1), `{"do": "toYaml"}`)
	f.Add(uint8(5), uint8(64), "\n: *x", int64(1<<40), `{"a": {"b": [1, "2", null]}}`)
	f.Fuzz(func(t *testing.T, which, keys uint8, s string, n int64, extra string) {
		tw, err := loadTwoWorkers()
		if err != nil {
			t.Fatal(err)
		}
		i := int(which) % len(tw.entries)
		res := tw.entries[i]
		spec := map[string]any{}
		_ = json.Unmarshal([]byte(extra), &spec)
		labels := map[string]any{}
		for k := range int(keys) % 40 {
			labels[fmt.Sprintf("k%02d-%s", (k*17)%40, strings.ToValidUTF8(s, ""))] = fmt.Sprint(s, k)
		}
		spec["labels"], spec["image"], spec["replicas"], spec["greeting"] = labels, s, n, s
		kind := res.Kind
		if kind == "" {
			kind = strings.ToUpper(res.Resource[:1]) + strings.TrimSuffix(res.Resource[1:], "s")
		}
		obj := &view.Object{Name: "fuzz", Namespace: "ns", UID: "u-fuzz", Generation: 1,
			Labels: map[string]string{}, Annotations: map[string]string{}, Spec: spec, Status: map[string]any{},
			Resource: view.ResourceInfo{Group: res.Group, Version: res.Version, Kind: kind, Resource: res.Resource}}
		outA, errA := renderBytes(tw.a[i], obj)
		outB, errB := renderBytes(tw.b[i], obj)
		timing := func(err error) bool {
			return err != nil && strings.Contains(err.Error(), "deadline")
		}
		switch {
		case timing(errA) || timing(errB):
			// Wall-clock: not a property of the render.
		case (errA == nil) != (errB == nil):
			t.Fatalf("%s: one worker rendered, the other failed:\n%v\n%v", res.Resource, errA, errB)
		case errA != nil && errA.Error() != errB.Error():
			t.Fatalf("%s: the two workers failed differently:\n%v\n%v", res.Resource, errA, errB)
		case outA != outB:
			t.Fatalf("%s: the two workers rendered different bytes:\n%s\n%s", res.Resource, outA, outB)
		}
	})
}

// renderBytes renders obj with s and encodes what came back: the
// children and the status.
func renderBytes(s *templates.Set, obj *view.Object) (string, error) {
	r, err := s.RenderWith(obj, nil)
	if err != nil {
		return "", err
	}
	b, err := json.Marshal(map[string]any{"children": r.Children, "status": r.Status})
	return string(b), err
}
