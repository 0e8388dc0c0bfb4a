package main

// "stencil test": a platform team's offline tests of its config (package
// configtest); here, the flags, the exit status and the output.

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"regexp"
	"time"

	"k8s.io/klog/v2"

	"stencil.dev/stencil/configtest"
	"stencil.dev/stencil/templates"
)

func testCommand(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("test", "[--config FILE] [PATH...] [--update] [--junit FILE] [-run REGEX] [--kube-version V]")
	cfgPath := fs.String("config", "stencil.yaml", "config `file` the cases render with")
	update := fs.Bool("update", false, "rewrite every golden file with what its case renders")
	junit := fs.String("junit", "", "also write the results as JUnit XML to `file`")
	run := fs.String("run", "", "run only the cases whose file: name matches this `regex`")
	kubeVersion := fs.String("kube-version", "", "Kubernetes `version` a chart sees as .Capabilities.KubeVersion (default: Helm's, as helm template)")
	// Paths and flags may come in any order: flag stops at the first
	// path, so parse again after each.
	var paths []string
	for {
		err := fs.Parse(args)
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(stdout)
			fs.Usage()
			return exitOK
		}
		if err != nil {
			fmt.Fprintf(stderr, "%s: %v\n", fs.Name(), err)
			fs.SetOutput(stderr)
			fs.Usage()
			return exitUsage
		}
		if fs.NArg() == 0 {
			break
		}
		paths = append(paths, fs.Arg(0))
		args = fs.Args()[1:]
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
	caps, err := offlineCapabilities(*kubeVersion, nil)
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
		tf, err := configtest.Load(f)
		if err != nil {
			loadErrs = append(loadErrs, err)
			continue
		}
		loaded = append(loaded, tf)
	}
	if len(loadErrs) > 0 {
		printErrors(stderr, errors.Join(loadErrs...))
		return exitUsage
	}
	// The cases render through the same wall as run and render.
	wall := newWall(1, klog.Background().V(2), nil)
	if wall != nil {
		defer wall.Close()
	}
	src := &sourceFlags{config: cfgPath, watches: new(string), wall: wall}
	cfg, sets, ok := src.load(fs, templates.Options{Capabilities: caps}, stderr)
	if !ok {
		return exitUsage
	}
	runner, err := configtest.NewRunner(cfg, sets, opts)
	if err != nil {
		fmt.Fprintf(stderr, "stencil test: %v\n", err)
		return exitUsage
	}
	start := time.Now()
	results, err := runner.Run(loaded)
	if err != nil {
		printErrors(stderr, err)
		return exitUsage
	}
	sum := configtest.Print(stdout, results, time.Since(start))
	if *junit != "" {
		if err := configtest.WriteJUnit(*junit, results); err != nil {
			fmt.Fprintf(stderr, "stencil test: --junit: %v\n", err)
			return exitUsage
		}
	}
	if sum.Failed > 0 {
		return exitFailed
	}
	return exitOK
}
