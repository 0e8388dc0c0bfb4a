package main

// "stencil diff": flags and output of the planner (controller/plan).

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	authorizationv1 "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"k8s.io/klog/v2"

	"stencil.dev/stencil/controller"
	"stencil.dev/stencil/controller/plan"
	"stencil.dev/stencil/controller/reads"
	"stencil.dev/stencil/renderworker"
	"stencil.dev/stencil/templates"
)

func diffCommand(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("diff", "--config NEW.yaml | --watches FILE [--kubeconfig F] [--namespace NS] [--manage-crds] [-o text|json]")
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig `file`; empty uses $KUBECONFIG or the in-cluster config")
	src := addSourceFlags(fs, "stencil.yaml", "config `file` whose renders are compared with the live cluster")
	namespace := fs.String("namespace", "", "diff only the resources of this `namespace` (default: each entry's namespaces, or all)")
	output := fs.String("o", "text", "output `format`: text or json")
	manageCRDs := fs.Bool("manage-crds", false, "also plan the generated CRDs, as run --manage-crds applies them (the same decision)")
	workers := fs.Int("workers", 8, "resources diffed in parallel")
	qps := fs.Float64("qps", 100, "client-side QPS limit towards the API server")
	burst := fs.Int("burst", 200, "client-side burst limit towards the API server")
	if status, done := parseFlags(fs, args, stdout, stderr); done {
		return status
	}
	if *output != "text" && *output != "json" {
		fmt.Fprintf(stderr, "stencil diff: -o %q: want text or json\n", *output)
		return exitUsage
	}
	if *workers < 1 {
		fmt.Fprintf(stderr, "stencil diff: --workers %d: want at least 1\n", *workers)
		return exitUsage
	}
	restConfig, err := controller.ClientConfig(*kubeconfig)
	if err != nil {
		fmt.Fprintf(stderr, "stencil diff: loading kubeconfig: %v\n", err)
		return exitUsage
	}
	// One read of discovery first: a cluster that cannot be read fails
	// here at once, naming why, instead of after the informers' two-minute
	// wait for caches that never sync.
	caps, err := controller.ClusterCapabilities(restConfig)
	if err != nil {
		fmt.Fprintf(stderr, "stencil diff: cannot read the cluster at %s: %v\n", restConfig.Host, err)
		return exitUsage
	}
	opts := templates.Options{Capabilities: caps}
	src.wall = renderworker.NewWall(*workers, klog.Background().V(2), nil)
	if src.wall != nil {
		defer src.wall.Close()
	}
	cfg, sets, ok := src.load(fs, opts, stderr)
	if !ok {
		return exitUsage
	}
	restConfig.QPS, restConfig.Burst = float32(*qps), *burst
	restConfig.UserAgent = "stencil-diff/" + version
	cl, err := controller.NewClients(restConfig)
	if err != nil {
		fmt.Fprintf(stderr, "stencil diff: %v\n", err)
		return exitUsage
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	// The controller's Sync runs here: what it logs at Info level is the
	// controller's story, not the plan's (-v 2 shows it).
	ctx = klog.NewContext(ctx, klog.Background().V(2))
	// Entries with an identity are dry-run as it: the plan shows what
	// the identity would be refused (this user needs impersonate on it).
	imp, err := controller.NewImpersonators(restConfig)
	if err != nil {
		fmt.Fprintf(stderr, "stencil diff: %v\n", err)
		return exitUsage
	}
	authz, err := authorizationv1.NewForConfig(restConfig)
	if err != nil {
		fmt.Fprintf(stderr, "stencil diff: %v\n", err)
		return exitUsage
	}
	d := &plan.Planner{
		Config: cfg, Sets: sets, Dynamic: cl.Dynamic, Metadata: cl.Metadata, Mapper: cl.Mapper, Impersonate: imp.Client,
		Authorize: reads.NewReviews(authz.SubjectAccessReviews()).Allowed,
		Namespace: *namespace, Workers: *workers, Warn: stderr, ManageCRDs: *manageCRDs,
	}
	if isTerminal(stderr) {
		d.Progress = stderr
	}
	report, err := d.Run(ctx)
	if err != nil {
		fmt.Fprintf(stderr, "stencil diff: %s: %v\n", cfg.Path, err)
		return exitUsage
	}
	if *output == "json" {
		err = plan.WriteJSON(stdout, report)
	} else {
		err = plan.WriteText(stdout, report)
	}
	if err != nil {
		fmt.Fprintf(stderr, "stencil diff: %v\n", err)
		return exitUsage
	}
	if report.HasChanges() {
		return exitFailed
	}
	return exitOK
}

// isTerminal reports whether w is a character device, so that a progress
// line rewritten in place does not end up in a log or a pipe.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
