package main

// "stencil manifests": the flags and the output; package install builds
// the objects.

import (
	"fmt"
	"io"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	"stencil.dev/stencil/config"
	"stencil.dev/stencil/controller/reload"
	"stencil.dev/stencil/install"
	"stencil.dev/stencil/templates"
)

// defaultImage is this build's image: its version's tag, latest for a
// development build.
func defaultImage() string {
	tag := "latest"
	if version != "dev" {
		tag = version
	}
	return "ghcr.io/stencil-dev/stencil:" + tag
}

func manifestsCommand(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("manifests", "--config FILE [--image I] [--namespace NS] [--ring N] [--monitoring] [--manage-crds] [--default-identity tenant:NAME]")
	cfgPath := fs.String("config", "stencil.yaml", "config `file`: it and every file it names are put in ConfigMaps")
	var o install.Options
	fs.StringVar(&o.Image, "image", defaultImage(), "stencil's container `image`")
	fs.StringVar(&o.Namespace, "namespace", "stencil-system", "`namespace` stencil runs in")
	fs.IntVar(&o.Ring, "ring", 0, "run a ring of `N` replicas that split the namespaces (run --ring stencil) instead of two under leader election")
	fs.BoolVar(&o.Monitoring, "monitoring", false, "add the ServiceMonitor and PrometheusRule (Prometheus Operator)")
	fs.BoolVar(&o.Role.ManageCRDs, "manage-crds", false, "run with --manage-crds, and grant what it needs")
	fs.BoolVar(&o.Role.MetricsSecure, "metrics-secure", false, "run with --metrics-secure (HTTPS, callers authorised by the API server), and grant the reviews it asks for")
	fs.Func("default-identity", "`tenant:NAME`: run with --default-identity, and print the roles it needs", func(v string) error {
		id, err := config.ParseDefaultIdentity(v)
		o.DefaultIdentity = id
		return err
	})
	if status, done := parseFlags(fs, args, stdout, stderr); done {
		return status
	}
	if o.Ring < 0 {
		fmt.Fprintf(stderr, "stencil manifests: --ring %d: must be a number of replicas\n", o.Ring)
		return exitUsage
	}
	if errs := validation.IsDNS1123Label(o.Namespace); len(errs) > 0 {
		fmt.Fprintf(stderr, "stencil manifests: --namespace %q: %s\n", o.Namespace, strings.Join(errs, "; "))
		return exitUsage
	}
	cfg, sets, err := reload.Source{Path: *cfgPath, DefaultIdentity: o.DefaultIdentity}.Load()
	if err != nil {
		fmt.Fprintln(stderr, err)
		return exitUsage
	}
	objs, err := install.Manifests(cfg, templates.Entries(sets), o)
	if err != nil {
		fmt.Fprintf(stderr, "stencil manifests: %v\n", err)
		return exitFailed
	}
	if err := writeYAML(&documents{w: stdout}, objs, unbounded); err != nil {
		fmt.Fprintf(stderr, "stencil manifests: %v\n", err)
		return exitFailed
	}
	return exitOK
}
