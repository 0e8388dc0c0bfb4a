package main

// stencil argocd: Argo CD health checks for the configured kinds.
//
// Argo CD keys a health check by group and Kind, but the config names each
// resource by its plural, and stencil never guesses one from the other
// ("webapps" is a WebApp, not a Webapp). Offline, the one place that says is
// the CRD, so the kinds come from the CRD manifests: by default those beside
// the config file, as in crds/.

import (
	"fmt"
	"io"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"stencil.dev/stencil/config"
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
	path := *crds
	if path == "" {
		path = cfg.Dir
	}
	kinds, err := install.CRDKinds(path)
	if err != nil {
		fmt.Fprintf(stderr, "stencil argocd: %v\n", err)
		return exitFailed
	}
	var gks []schema.GroupKind
	status := exitOK
	for i, r := range cfg.Resources {
		gr := r.GVR().GroupResource()
		kind, ok := kinds[gr]
		if !ok {
			fmt.Fprintf(stderr, "stencil argocd: %s: %s: no CustomResourceDefinition for %s in %s (name the CRDs with --crds)\n",
				cfg.Path, config.EntryName(i, r), gr, path)
			status = exitFailed
			continue
		}
		gks = append(gks, schema.GroupKind{Group: r.Group, Kind: kind})
	}
	// Half a set of health checks pasted into argocd-cm looks complete: print
	// all or nothing.
	if status != exitOK {
		return status
	}
	io.WriteString(stdout, install.ArgoCDHealthChecks(gks))
	return exitOK
}
