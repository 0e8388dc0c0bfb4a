package main

// "stencil crd": the CRDs of the entries that declare their API.

import (
	"fmt"
	"io"

	"stencil.dev/stencil/entry"
	"stencil.dev/stencil/templates"
)

func crdCommand(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("crd", "--config FILE | --watches FILE")
	src := addSourceFlags(fs, "stencil.yaml", "config `file` whose entries with a schema get a CRD")
	if status, done := parseFlags(fs, args, stdout, stderr); done {
		return status
	}
	cfg, sets, ok := src.load(fs, templates.Options{}, stderr)
	if !ok {
		return exitUsage
	}
	entries := templates.Entries(sets)
	for _, w := range entry.Warnings(entries) {
		fmt.Fprintln(stderr, "warning: "+w)
	}
	objs, err := entry.CRDObjects(entries)
	if err != nil {
		fmt.Fprintf(stderr, "stencil crd: %v\n", err)
		return exitFailed
	}
	if len(objs) == 0 {
		fmt.Fprintf(stderr, "stencil crd: %s: no entry has a schema\n", cfg.Path)
	}
	if err := writeYAML(&documents{w: stdout}, objs, unbounded); err != nil {
		fmt.Fprintf(stderr, "stencil crd: %v\n", err)
		return exitFailed
	}
	return exitOK
}
