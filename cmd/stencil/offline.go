package main

// The offline subcommands: with --config they read files only, never a
// kubeconfig (--watches asks the API server's discovery for the plurals,
// and validate --server sends the generated CRDs as a dry run).

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	authorizationv1client "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"k8s.io/klog/v2"

	"stencil.dev/stencil/config"
	"stencil.dev/stencil/controller"
	"stencil.dev/stencil/controller/reconcile"
	"stencil.dev/stencil/entry"
	"stencil.dev/stencil/install"
	"stencil.dev/stencil/renderworker"
	"stencil.dev/stencil/templates"
	"stencil.dev/stencil/templates/view"
)

func validateCommand(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("validate", "--config FILE | --watches FILE [--server [--kubeconfig F] [--controller-account NS/NAME]]")
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig `file` for --server and --watches; empty uses $KUBECONFIG or the in-cluster config")
	src := addSourceFlags(fs, "stencil.yaml", "config `file` listing resources and templates")
	server := fs.Bool("server", false, "also send the generated CRDs to the API server as a dry run: the checks only it makes (CEL rules compile within their cost); and ask whether stencil's account may impersonate each identity")
	controllerAccount := fs.String("controller-account", "stencil-system/stencil", "with --server: stencil's ServiceAccount, `NS/NAME`, whose right to impersonate the entries' identities is asked (the account stencil manifests creates)")
	if status, done := parseFlags(fs, args, stdout, stderr); done {
		return status
	}
	cfg, sets, ok := src.load(fs, templates.Options{}, stderr)
	if !ok {
		return exitUsage
	}
	if *server {
		if status := validateOnServer(cfg, templates.Entries(sets), *kubeconfig, *controllerAccount, stdout, stderr); status != exitOK {
			return status
		}
	}
	for _, w := range entry.Warnings(templates.Entries(sets)) {
		fmt.Fprintln(stderr, "warning: "+w)
	}
	var nTemplates, nStatus, nCharts int
	for _, r := range cfg.Resources {
		nTemplates += len(r.Templates)
		if r.StatusTemplate != "" {
			nStatus++
		}
		if r.Chart != "" {
			nCharts++
		}
	}
	charts := ""
	if nCharts > 0 {
		charts = ", " + plural(nCharts, "chart")
	}
	fmt.Fprintf(stdout, "%s: %s, %s, %s%s OK\n", cfg.Path,
		plural(len(cfg.Resources), "resource"), plural(nTemplates, "template"), plural(nStatus, "status template"), charts)
	return exitOK
}

// validateOnServer dry-runs cfg's generated CRDs against the API server
// of kubeconfig, and asks it whether account (stencil's) may impersonate
// each identity the entries name (checkImpersonation).
func validateOnServer(cfg *config.Config, entries []*entry.Entry, kubeconfig, account string, stdout, stderr io.Writer) int {
	restConfig, err := controller.ClientConfig(kubeconfig)
	if err != nil {
		fmt.Fprintf(stderr, "stencil validate: loading kubeconfig: %v\n", err)
		return exitUsage
	}
	client, err := dynamic.NewForConfig(restConfig)
	if err != nil {
		fmt.Fprintf(stderr, "stencil validate: %v\n", err)
		return exitUsage
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	changes, err := reconcile.PlanCRDs(ctx, client, entries)
	if err != nil {
		fmt.Fprintf(stderr, "%s: the API server refuses a generated CRD:\n%v\n", cfg.Path, err)
		return exitUsage
	}
	objs, err := entry.CRDObjects(entries)
	if err != nil {
		fmt.Fprintf(stderr, "stencil validate: %v\n", err)
		return exitFailed
	}
	fmt.Fprintf(stdout, "%s: the API server accepts %s (dry run; %d would change)\n", cfg.Path, plural(len(objs), "generated CRD"), len(changes))
	if !slices.ContainsFunc(cfg.Resources, func(r config.Resource) bool { return r.Identity != nil }) {
		return exitOK
	}
	authz, err := authorizationv1client.NewForConfig(restConfig)
	if err != nil {
		fmt.Fprintf(stderr, "stencil validate: %v\n", err)
		return exitUsage
	}
	refused, err := checkImpersonation(ctx, authz.SubjectAccessReviews(), cfg, account)
	if err != nil {
		fmt.Fprintf(stderr, "stencil validate: %v\n", err)
		return exitUsage
	}
	if len(refused) > 0 {
		fmt.Fprintln(stderr, strings.Join(refused, "\n"))
		return exitUsage
	}
	fmt.Fprintf(stdout, "%s: %s may impersonate every identity the config names\n", cfg.Path, account)
	return exitOK
}

func renderCommand(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := newFlagSet("render", "--config FILE | --watches FILE -f RESOURCE.yaml [--kube-version V] [--api-versions G/V] [--observed CHILDREN.yaml] [--reads OBJECTS.yaml] [--resource PLURAL] [--namespace NS]")
	src := addSourceFlags(fs, "stencil.yaml", "config `file` listing resources and templates")
	var file string
	fs.StringVar(&file, "f", "", "`file` holding custom resources (--- separated); - reads stdin")
	fs.StringVar(&file, "filename", "", "same as -f `file`")
	resource := fs.String("resource", "", "config entry to use, by `plural`; needed only when several entries share the resource's group and version")
	namespace := fs.String("namespace", "default", "`namespace` for resources that name none, as kubectl apply would")
	kubeVersion := fs.String("kube-version", "", "Kubernetes `version` a chart sees as .Capabilities.KubeVersion (default: Helm's, as helm template)")
	var apiVersions listFlag
	fs.Var(&apiVersions, "api-versions", "extra API `versions` a chart sees in .Capabilities.APIVersions (group/version or group/version/Kind, repeatable or comma-separated)")
	observedFile := fs.String("observed", "", "`file` of live children (--- separated) that templates read (observed, ready, dependsOn); without it none exist, and templates that read them wait")
	readsFile := fs.String("reads", "", "`file` of the objects the entries' reads see (--- separated); without it none exist, and a resource with a required read waits")
	if status, done := parseFlags(fs, args, stdout, stderr); done {
		return status
	}
	if file == "" {
		fmt.Fprintf(stderr, "%s: -f is required\n", fs.Name())
		fs.SetOutput(stderr)
		fs.Usage()
		return exitUsage
	}
	caps, err := templates.OfflineCapabilities(*kubeVersion, apiVersions)
	if err != nil {
		fmt.Fprintf(stderr, "stencil render: %v\n", err)
		return exitUsage
	}
	// The CLI renders through the same wall as run: it dies no more than
	// the controller does.
	src.wall = renderworker.NewWall(1, klog.Background().V(2), nil)
	if src.wall != nil {
		defer src.wall.Close()
	}
	cfg, sets, ok := src.load(fs, templates.Options{Capabilities: caps}, stderr)
	if !ok {
		return exitUsage
	}
	var data []byte
	if file == "-" {
		data, err = io.ReadAll(stdin)
	} else {
		data, err = os.ReadFile(file)
	}
	if err != nil {
		fmt.Fprintf(stderr, "stencil render: %v\n", err)
		return exitFailed
	}
	objs, err := decodeResources(data)
	if err != nil {
		fmt.Fprintf(stderr, "stencil render: %s: %v\n", file, err)
		return exitFailed
	}
	if len(objs) == 0 {
		fmt.Fprintf(stderr, "stencil render: %s: no resources found\n", file)
		return exitFailed
	}
	observed, ok := readObjects("--observed", *observedFile, stderr)
	if !ok {
		return exitFailed
	}
	readable, ok := readObjects("--reads", *readsFile, stderr)
	if !ok {
		return exitFailed
	}
	reads := templates.NewStaticReads(readable, *namespace, sets)
	status := exitOK
	out := &documents{w: stdout}
	for _, u := range objs {
		if u.GetNamespace() == "" {
			u.SetNamespace(*namespace)
		}
		where := fmt.Sprintf("%s: %s %s/%s", file, u.GetKind(), u.GetNamespace(), u.GetName())
		set, err := templates.FindSet(cfg.Path, sets, u, *resource)
		if err != nil {
			fmt.Fprintf(stderr, "stencil render: %s: %v\n", where, err)
			status = exitFailed
			continue
		}
		if !renderOne(out, stderr, where, set, u, reconcile.Observed(observed, u.GetNamespace(), *namespace), reads) {
			status = exitFailed
		}
	}
	return status
}

// renderOne renders one custom resource u with set: its children to out,
// what the controller would not apply or would wait for to stderr. It
// reports whether everything rendered.
func renderOne(out *documents, stderr io.Writer, where string, set *templates.Set, u *unstructured.Unstructured, live templates.Live, reads templates.ReadSource) bool {
	r, resolved, err := set.RenderOffline(u, live, reads)
	if resolved != nil {
		for _, ref := range resolved.Refs {
			fmt.Fprintf(stderr, "stencil render: %s: reads %s\n", where, ref)
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "stencil render: %s:\n", where)
		fmt.Fprintln(stderr, err)
		return false
	}
	if r == nil {
		// What the controller does: nothing rendered, nothing written.
		fmt.Fprintf(stderr, "stencil render: %s: waits: required read %s does not exist (give it with --reads)\n", where, strings.Join(resolved.Missing, ", "))
		return true
	}
	for _, w := range r.Waits {
		fmt.Fprintf(stderr, "stencil render: %s: waits: %s\n", where, w)
	}
	for _, d := range r.Dropped {
		fmt.Fprintf(stderr, "stencil render: %s: not given to the chart (not in the entry's API): %s\n", where, d)
	}
	for _, h := range r.Hooks {
		fmt.Fprintf(stderr, "stencil render: %s: not applied (hook or test): %s\n", where, h)
	}
	if c := set.Chart(); c != nil {
		for _, f := range c.CRDs() {
			fmt.Fprintf(stderr, "stencil render: %s: not installed (crds/): %s\n", where, f)
		}
	}
	if r.StatusWaits {
		fmt.Fprintf(stderr, "stencil render: %s: waits: the status template reads a child that does not exist\n", where)
	}
	// Printed within what the wall lets one render return: YAML indents a
	// list once per level, so a result well within it can print
	// thousands of times larger (a list 9,990 deep, 40 KB, prints 95 MB).
	if err := writeYAML(out, r.Children, renderworker.OutputBound(set.Budget())); err != nil {
		var over *overBoundError
		if errors.As(err, &over) {
			fmt.Fprintf(stderr, "stencil render: %s: %v of one render's output (%d times renderBudget.stringBytes); nothing of this render is printed\n", where, err, renderworker.OutputObjects)
			return false
		}
		fmt.Fprintf(stderr, "stencil render: %s: %v\n", where, err)
		return false
	}
	return true
}

// readObjects reads the objects of the file a flag names; none without
// one.
func readObjects(flag, path string, stderr io.Writer) ([]*unstructured.Unstructured, bool) {
	if path == "" {
		return nil, true
	}
	data, err := os.ReadFile(path)
	var objs []*unstructured.Unstructured
	if err == nil {
		objs, err = decodeResources(data)
	}
	if err != nil {
		fmt.Fprintf(stderr, "stencil render: %s %s: %v\n", flag, path, err)
		return nil, false
	}
	return objs, true
}

// decodeResources decodes every non-empty document of a YAML stream
// (view.DecodeObjects); each must name its apiVersion and kind.
func decodeResources(data []byte) ([]*unstructured.Unstructured, error) {
	objs, err := view.DecodeObjects(data)
	if err != nil {
		return nil, err
	}
	for i, u := range objs {
		if u.GetAPIVersion() == "" || u.GetKind() == "" {
			return nil, fmt.Errorf("object %d: apiVersion and kind are required", i+1)
		}
	}
	return objs, nil
}

func rbacCommand(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("rbac", "--config FILE | --watches FILE [--name NAME]")
	src := addSourceFlags(fs, "stencil.yaml", "config `file` listing resources and templates")
	name := fs.String("name", "stencil", "`name` of the ClusterRole (the leader-election Role is NAME-leader-election)")
	metricsSecure := fs.Bool("metrics-secure", false, "also grant what run --metrics-secure needs: creating token and access reviews")
	manageCRDs := fs.Bool("manage-crds", false, "also grant what run --manage-crds needs: reading and applying the CRDs the config generates, by name")
	if status, done := parseFlags(fs, args, stdout, stderr); done {
		return status
	}
	_, sets, ok := src.load(fs, templates.Options{}, stderr)
	if !ok {
		return exitUsage
	}
	ro := install.RoleOptions{ManageCRDs: *manageCRDs, MetricsSecure: *metricsSecure}
	cr, err := install.ClusterRole(*name, templates.Entries(sets), ro)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return exitUsage
	}
	identities, err := install.IdentityRoles(*name, templates.Entries(sets), ro)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return exitUsage
	}
	// The Role for the Lease, to create in the namespace stencil runs in,
	// follows the ClusterRole; then the role of each identity, for the
	// platform to bind to its account.
	objs := []any{cr, install.LeaseRole(*name + "-leader-election")}
	for _, r := range identities {
		objs = append(objs, r)
	}
	if err := writeYAML(&documents{w: stdout}, objs, unbounded); err != nil {
		fmt.Fprintf(stderr, "stencil rbac: %v\n", err)
		return exitFailed
	}
	return exitOK
}

func versionCommand(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("version", "")
	if status, done := parseFlags(fs, args, stdout, stderr); done {
		return status
	}
	fmt.Fprintf(stdout, "stencil %s\n", version)
	return exitOK
}
