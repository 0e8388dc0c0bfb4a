package main

// What every subcommand writes: YAML documents, counts.

import (
	"fmt"
	"io"

	"sigs.k8s.io/yaml"
)

// documents writes YAML documents separated by "---".
type documents struct {
	w     io.Writer
	wrote bool
}

// writeYAML writes objs to d as YAML documents, all or nothing: every one
// is marshalled before the first is written, so a failure leaves no half a
// manifest on stdout.
func writeYAML[T any](d *documents, objs []T) error {
	docs := make([][]byte, len(objs))
	for i, o := range objs {
		b, err := yaml.Marshal(o)
		if err != nil {
			return err
		}
		docs[i] = b
	}
	for _, doc := range docs {
		if d.wrote {
			fmt.Fprintln(d.w, "---")
		}
		d.wrote = true
		d.w.Write(doc)
	}
	return nil
}

// plural is "1 noun" or "n nouns".
func plural(n int, noun string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, noun)
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
