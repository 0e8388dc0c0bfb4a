package main

// What every subcommand writes: YAML documents, counts.

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"

	"go.yaml.in/yaml/v2"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
)

// documents writes YAML documents separated by "---".
type documents struct {
	w     io.Writer
	wrote bool
}

// unbounded is the bound of what stencil writes of its own (CRDs,
// manifests, RBAC): built from the operator's config, not from a tenant's
// spec.
const unbounded = math.MaxInt64

// writeYAML writes objs to d as YAML documents, all or nothing: every one
// is encoded before the first is written, so a failure leaves no half a
// manifest on stdout. Their documents together may hold at most bound
// bytes: the object that would take them past it is refused
// (*overBoundError). The first encoding only counts, and stops at the
// bound, so neither the check nor the output ever holds the document (a
// list d deep is indented d times: 40 KB of spec can print 95 MB); the
// second writes the same bytes to d as they come.
func writeYAML[T any](d *documents, objs []T, bound int64) error {
	values := make([]any, len(objs))
	count := &boundedCounter{limit: bound}
	for i, o := range objs {
		v, err := yamlValue(o)
		if err == nil {
			err = encodeYAML(count, v)
		}
		if err != nil {
			if count.over {
				return &overBoundError{Object: describe(o), Bound: bound}
			}
			return fmt.Errorf("%s: %w", describe(o), err)
		}
		values[i] = v
	}
	w := bufio.NewWriter(d.w)
	for _, v := range values {
		if d.wrote {
			w.WriteString("---\n")
		}
		d.wrote = true
		// The same value encoded as counted: it cannot fail now but by
		// the writer's error, which Flush returns.
		_ = encodeYAML(w, v)
	}
	if err := w.Flush(); err != nil {
		return fmt.Errorf("writing the output: %w", err)
	}
	return nil
}

// yamlValue is o as sigs.k8s.io/yaml's Marshal reads it before printing:
// its JSON, read back by yaml.v2 (which keeps integers integers).
func yamlValue(o any) (any, error) {
	j, err := json.Marshal(o)
	if err != nil {
		return nil, err
	}
	var v any
	if err := yaml.Unmarshal(j, &v); err != nil {
		return nil, err
	}
	return v, nil
}

// encodeYAML writes v, a yamlValue, to w as sigs.k8s.io/yaml's Marshal
// prints it, byte for byte, but streamed: yaml.v2's encoder hands w its
// output every 128 bytes, where Marshal builds the whole document first.
// A writer that refuses past a bound stops the encoding there.
func encodeYAML(w io.Writer, v any) error {
	enc := yaml.NewEncoder(w)
	if err := enc.Encode(v); err != nil {
		return err
	}
	return enc.Close()
}

// errOverBound is what a boundedCounter answers a write past its limit.
var errOverBound = errors.New("over the output bound")

// boundedCounter counts what is written to it, keeping none of it, and
// refuses the write that would take the count past limit. over remembers
// the refusal: yaml.v2 reports a writer's error as text alone.
type boundedCounter struct {
	n, limit int64
	over     bool
}

// Write counts p, or refuses it when it would pass the limit.
func (c *boundedCounter) Write(p []byte) (int, error) {
	if c.n+int64(len(p)) > c.limit {
		c.over = true
		return 0, errOverBound
	}
	c.n += int64(len(p))
	return len(p), nil
}

// overBoundError is an object whose YAML would take what one writeYAML
// call prints past its bound.
type overBoundError struct {
	// Object is the object, as describe names it.
	Object string
	// Bound is the bound, in bytes.
	Bound int64
}

// Error names the object and the bound.
func (e *overBoundError) Error() string {
	return fmt.Sprintf("%s: not printed: its YAML would take the output past %d bytes, the bound", e.Object, e.Bound)
}

// describe names o as kubectl does, "Kind namespace/name" ("Kind name"
// for a cluster-scoped one), for messages about what is printed.
func describe(o any) string {
	kind := "object"
	if ro, ok := o.(runtime.Object); ok {
		if k := ro.GetObjectKind().GroupVersionKind().Kind; k != "" {
			kind = k
		}
	}
	m, err := meta.Accessor(o)
	if err != nil {
		return kind
	}
	if m.GetNamespace() == "" {
		return kind + " " + m.GetName()
	}
	return kind + " " + m.GetNamespace() + "/" + m.GetName()
}

// plural is "1 noun" or "n nouns".
func plural(n int, noun string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, noun)
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
