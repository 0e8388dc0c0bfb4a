// Command stencil is a generic Kubernetes controller for several CRDs at
// once: a config file lists the resources to watch and the Go templates that
// render their Deployments and Services.
//
// "stencil run" is the controller (run.go). "stencil diff" (diff.go) reads
// the cluster and writes nothing: it shows what a config would change. The
// other subcommands work offline: with --config they never read a
// kubeconfig (with --watches, those that take it ask the API server's
// discovery for each kind's plural, source.go). validate
// checks a config and its templates, render prints the children a custom
// resource would get, test runs a config's test cases (test.go), rbac prints the least-privilege ClusterRole, argocd
// prints Argo CD health checks, crd prints the CRDs the entries' schemas
// generate, manifests prints everything a cluster needs to run stencil with
// a config (manifests.go), version prints the version.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"stencil.dev/stencil/controller/reload"
	"stencil.dev/stencil/renderworker"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

// Exit statuses of the offline subcommands.
const (
	exitOK     = 0
	exitFailed = 1 // the command ran and failed, e.g. a resource did not render
	exitUsage  = 2 // bad usage, or a config or template error
)

const usage = `Usage: stencil <command> [flags]

Commands:
  run        run the controller (stencil run -h for flags)
  validate   check a config file and its templates, offline
  render     print the children of custom resources as YAML, offline
  test       run a config's test cases (tests/*.yaml), offline
  rbac       print the least-privilege ClusterRole for a config
  argocd     print Argo CD health checks (argocd-cm entries) for a config
  crd        print the CRDs of the entries that declare their API (schema)
  manifests  print everything a cluster needs to run stencil with a config
  diff       show what a config would change in the live cluster, writing nothing
  version    print the version

Run "stencil <command> -h" for a command's flags.
`

func main() {
	if renderworker.IsWorker() {
		// A render worker of a stencil process (package renderworker):
		// it serves renders over its pipes, whatever the arguments.
		os.Exit(renderworker.Serve(reload.WorkerLoad))
	}
	os.Exit(dispatch(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// dispatch runs one subcommand and returns the process exit status.
func dispatch(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "run":
		return runCommand(rest)
	case "validate":
		return validateCommand(rest, stdout, stderr)
	case "render":
		return renderCommand(rest, stdin, stdout, stderr)
	case "test":
		return testCommand(rest, stdin, stdout, stderr)
	case "rbac":
		return rbacCommand(rest, stdout, stderr)
	case "argocd":
		return argocdCommand(rest, stdout, stderr)
	case "diff":
		return diffCommand(rest, stdout, stderr)
	case "crd":
		return crdCommand(rest, stdout, stderr)
	case "manifests":
		return manifestsCommand(rest, stdout, stderr)
	case "version":
		return versionCommand(rest, stdout, stderr)
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
		return exitOK
	}
	fmt.Fprintf(stderr, "stencil: unknown command %q\n\n%s", cmd, usage)
	return exitUsage
}

// newFlagSet returns a flag set whose usage and errors the caller prints,
// so that -h goes to stdout (exit 0) and mistakes go to stderr (exit 2).
func newFlagSet(name, synopsis string) *flag.FlagSet {
	fs := flag.NewFlagSet("stencil "+name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: stencil %s %s\n\nFlags:\n", name, synopsis)
		fs.PrintDefaults()
	}
	return fs
}

// parseFlags parses args; it returns done=true with the exit status when the
// command must stop here (-h, a bad flag or a stray argument).
func parseFlags(fs *flag.FlagSet, args []string, stdout, stderr io.Writer) (status int, done bool) {
	err := fs.Parse(args)
	if errors.Is(err, flag.ErrHelp) {
		fs.SetOutput(stdout)
		fs.Usage()
		return exitOK, true
	}
	if err == nil && fs.NArg() > 0 {
		err = fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", fs.Name(), err)
		fs.SetOutput(stderr)
		fs.Usage()
		return exitUsage, true
	}
	return exitOK, false
}
