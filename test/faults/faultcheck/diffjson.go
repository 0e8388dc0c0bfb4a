package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
)

// diffPlan is the JSON form of stencil diff as docs/operating.md ("A plan before a template change") states it
// ("Command line"); extra fields are allowed.
type diffPlan struct {
	Children []struct {
		Parent *struct {
			Resource  *string `json:"resource"`
			Namespace *string `json:"namespace"`
			Name      *string `json:"name"`
		} `json:"parent"`
		Kind   *string   `json:"kind"`
		Name   *string   `json:"name"`
		Action *string   `json:"action"`
		Fields *[]string `json:"fields"`
	} `json:"children"`
	Summary *struct {
		Create    *int `json:"create"`
		Update    *int `json:"update"`
		Prune     *int `json:"prune"`
		Unchanged *int `json:"unchanged"`
	} `json:"summary"`
}

// checkDiffJSON reads the output of stencil diff -o json from r, checks it
// against the contract (every field present, actions create, update or
// prune, the summary's counts equal to the children listed) and prints
// "create=N update=N prune=N unchanged=N", then one line per kind, action
// and field with the number of children: "Deployment update spec.x 20".
func checkDiffJSON(r io.Reader, w io.Writer) error {
	data, err := io.ReadAll(r)
	if err != nil {
		return fmt.Errorf("reading the plan: %w", err)
	}
	var p diffPlan
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&p); err != nil {
		return fmt.Errorf("the plan is not JSON: %w", err)
	}
	if p.Summary == nil || p.Summary.Create == nil || p.Summary.Update == nil || p.Summary.Prune == nil || p.Summary.Unchanged == nil {
		return errors.New("summary lacks create, update, prune or unchanged")
	}
	counts := map[string]int{}
	byField := map[string]int{}
	for i, c := range p.Children {
		if c.Parent == nil || c.Parent.Resource == nil || c.Parent.Namespace == nil || c.Parent.Name == nil ||
			c.Kind == nil || c.Name == nil || c.Action == nil || c.Fields == nil {
			return fmt.Errorf("children[%d] lacks one of parent.resource, parent.namespace, parent.name, kind, name, action, fields", i)
		}
		if !slices.Contains([]string{"create", "update", "prune"}, *c.Action) {
			return fmt.Errorf("children[%d]: action %q is not create, update or prune", i, *c.Action)
		}
		counts[*c.Action]++
		for _, f := range *c.Fields {
			byField[*c.Kind+" "+*c.Action+" "+f]++
		}
	}
	s := p.Summary
	if counts["create"] != *s.Create || counts["update"] != *s.Update || counts["prune"] != *s.Prune {
		return fmt.Errorf("summary create=%d update=%d prune=%d disagrees with the children listed (%d, %d, %d)",
			*s.Create, *s.Update, *s.Prune, counts["create"], counts["update"], counts["prune"])
	}
	fmt.Fprintf(w, "create=%d update=%d prune=%d unchanged=%d\n", *s.Create, *s.Update, *s.Prune, *s.Unchanged)
	keys := make([]string, 0, len(byField))
	for k := range byField {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintln(w, strings.TrimSpace(k), byField[k])
	}
	return nil
}
