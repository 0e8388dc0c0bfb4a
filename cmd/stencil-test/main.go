// Command stencil-test is "stencil test": a platform team's offline tests
// of its config (package configtest), run by "stencil test ARGS" (which
// finds this binary next to itself, or on PATH) or directly.
//
// The design choice a newcomer may question: it is its own binary, as
// git's subcommands are. Its assertions are CEL (cel-go), its schema
// checks use client-go's bundled schemas, and it admits custom resources
// with the API server's own packages (k8s.io/apiserver's CEL library,
// gRPC, OpenTelemetry); linked into stencil they would cost every stencil
// process, the controller and each of its render workers, 11 MiB of
// memory at start (about 5 MiB more for the API server's packages) for a
// command the controller never runs.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"stencil.dev/stencil/config"
	"stencil.dev/stencil/controller/reload"
	"stencil.dev/stencil/renderworker"
	"stencil.dev/stencil/templates"
)

// Exit statuses, stencil's: a case failed is 1, a config or test file
// that cannot run is 2.
const (
	exitOK     = 0
	exitFailed = 1
	exitUsage  = 2
)

func main() {
	if renderworker.IsWorker() {
		// A render worker of this process: the same wall as stencil's.
		os.Exit(renderworker.Serve(reload.WorkerLoad))
	}
	args := os.Args[1:]
	if len(args) > 0 && args[0] == "test" {
		args = args[1:]
	}
	// Nothing cancels it: SIGINT and SIGTERM end the process, its render
	// workers with it (they watch their pipe).
	os.Exit(testCommand(context.Background(), args, os.Stdout, os.Stderr))
}

// load loads and compiles the config at path, printing every error; wall,
// when set, renders the sets.
func load(path string, opts templates.Options, wall *renderworker.Pool, stderr io.Writer) (*config.Config, []*templates.Set, bool) {
	cfg, sets, err := reload.Source{Path: path, Options: opts, Wall: wall}.Load()
	if err != nil {
		fmt.Fprintln(stderr, err)
		return nil, nil, false
	}
	return cfg, sets, true
}

// parseArgs parses flags and paths in any order (flag stops at the first
// path); done says the command ends here, with status.
func parseArgs(fs *flag.FlagSet, args []string, stdout, stderr io.Writer) (paths []string, status int, done bool) {
	for {
		err := fs.Parse(args)
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(stdout)
			fs.Usage()
			return nil, exitOK, true
		}
		if err != nil {
			fmt.Fprintf(stderr, "%s: %v\n", fs.Name(), err)
			fs.SetOutput(stderr)
			fs.Usage()
			return nil, exitUsage, true
		}
		if fs.NArg() == 0 {
			return paths, exitOK, false
		}
		paths = append(paths, fs.Arg(0))
		args = fs.Args()[1:]
	}
}
