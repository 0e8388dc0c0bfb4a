package main

// "stencil test": the flags, the exit status and the output.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"regexp"
	"time"

	"k8s.io/klog/v2"

	"stencil.dev/stencil/configtest"
	"stencil.dev/stencil/renderworker"
	"stencil.dev/stencil/templates"
	"stencil.dev/stencil/templates/coverage"
)

func testCommand(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("stencil test", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: stencil test [--config FILE] [PATH...] [--update] [--junit FILE] [--coverage] [--min-coverage N] [-run REGEX] [--kube-version V]\n\nRuns the cases of the test files PATH names (default: tests/*.yaml next to the config); docs/testing-configs.md.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	cfgPath := fs.String("config", "stencil.yaml", "config `file` the cases render with")
	update := fs.Bool("update", false, "rewrite every golden file with what its case renders")
	junit := fs.String("junit", "", "also write the results as JUnit XML to `file`")
	run := fs.String("run", "", "run only the cases whose file: name matches this `regex`")
	withCoverage := fs.Bool("coverage", false, "print which if/else/range/with branches of each template the cases took (renders then run in this process)")
	minCoverage := fs.Float64("min-coverage", 0, "fail (exit 1) when the cases take fewer than `N` percent of the templates' branches; implies --coverage")
	kubeVersion := fs.String("kube-version", "", "Kubernetes `version` a chart sees as .Capabilities.KubeVersion (default: Helm's, as helm template)")
	paths, status, done := parseArgs(fs, args, stdout, stderr)
	if done {
		return status
	}
	opts := configtest.Options{Update: *update}
	if *run != "" {
		re, err := regexp.Compile(*run)
		if err != nil {
			fmt.Fprintf(stderr, "stencil test: -run %q: %v\n", *run, err)
			return exitUsage
		}
		opts.Run = re
	}
	caps, err := templates.OfflineCapabilities(*kubeVersion, nil)
	if err != nil {
		fmt.Fprintf(stderr, "stencil test: %v\n", err)
		return exitUsage
	}
	files, err := configtest.Find(*cfgPath, paths)
	if err != nil {
		fmt.Fprintf(stderr, "stencil test: %v\n", err)
		return exitUsage
	}
	if len(files) == 0 {
		fmt.Fprintf(stderr, "stencil test: no test files (tests/*.yaml next to %s, or name them)\n", *cfgPath)
		return exitUsage
	}
	var loaded []*configtest.File
	var loadErrs []error
	for _, f := range files {
		tf, err := configtest.Load(f, *cfgPath)
		if err != nil {
			loadErrs = append(loadErrs, err)
			continue
		}
		loaded = append(loaded, tf)
	}
	if len(loadErrs) > 0 {
		fmt.Fprintln(stderr, errors.Join(loadErrs...))
		return exitUsage
	}
	topts := templates.Options{Capabilities: caps}
	var wall *renderworker.Pool
	if *withCoverage || *minCoverage > 0 {
		// A render worker loads its own sets, without the branch calls.
		topts.Coverage = coverage.New()
	} else {
		// The cases render through the same wall as run and render.
		if wall = renderworker.NewWall(1, klog.Background().V(2), nil); wall != nil {
			defer wall.Close()
		}
	}
	cfg, sets, ok := load(*cfgPath, topts, wall, stderr)
	if !ok {
		return exitUsage
	}
	runner, err := configtest.NewRunner(ctx, cfg, sets, opts)
	if err != nil {
		fmt.Fprintf(stderr, "stencil test: %v\n", err)
		return exitUsage
	}
	defer runner.Close()
	start := time.Now()
	results, err := runner.Run(ctx, loaded)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return exitUsage
	}
	sum := configtest.Print(stdout, results, time.Since(start))
	if *junit != "" {
		if err := configtest.WriteJUnit(*junit, results); err != nil {
			fmt.Fprintf(stderr, "stencil test: --junit: %v\n", err)
			return exitUsage
		}
	}
	if topts.Coverage != nil {
		if pct := configtest.PrintCoverage(stdout, topts.Coverage); pct < *minCoverage {
			fmt.Fprintf(stdout, "coverage %.1f%% is under --min-coverage %g%%\n", pct, *minCoverage)
			return exitFailed
		}
	}
	if sum.Failed > 0 {
		return exitFailed
	}
	return exitOK
}
