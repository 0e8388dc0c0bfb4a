package main

// stencil argocd: Argo CD health checks for the configured kinds, whose
// Kinds come from the CRD manifests (install.ArgoCDKinds): by default those
// beside the config file, as in crds/.

import (
	"fmt"
	"io"
	"strings"

	"stencil.dev/stencil/install"
	"stencil.dev/stencil/templates"
)

func argocdCommand(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("argocd", "--config FILE | --watches FILE [--crds PATH]")
	src := addSourceFlags(fs, "stencil.yaml", "config `file` listing resources and templates")
	crds := fs.String("crds", "", "`path` of the CRD manifests that give each resource's kind: a file, or a directory of .yaml, .yml and .json files (default: the config file's directory)")
	if status, done := parseFlags(fs, args, stdout, stderr); done {
		return status
	}
	cfg, _, ok := src.load(fs, templates.Options{}, stderr)
	if !ok {
		return exitUsage
	}
	gks, err := install.ArgoCDKinds(cfg, *crds)
	if err != nil {
		for _, line := range strings.Split(err.Error(), "\n") {
			fmt.Fprintf(stderr, "stencil argocd: %s\n", line)
		}
		return exitFailed
	}
	io.WriteString(stdout, install.ArgoCDHealthChecks(gks))
	return exitOK
}
