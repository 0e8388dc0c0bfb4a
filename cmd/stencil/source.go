package main

// Where the config comes from (--config, or helm-operator's --watches)
// and what a chart sees of the cluster (.Capabilities), for every
// subcommand.

import (
	"errors"

	"flag"
	"fmt"
	"io"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"

	"helm.sh/helm/v4/pkg/chart/common"

	"stencil.dev/stencil/config"
	"stencil.dev/stencil/controller/reload"
	"stencil.dev/stencil/renderworker"
	"stencil.dev/stencil/templates"
)

// sourceFlags are --config and --watches (exclusive).
type sourceFlags struct {
	config, watches *string
	// wall, when set, renders the loaded sets in its workers.
	wall *renderworker.Pool
}

// addSourceFlags registers --config (default def) and --watches on fs,
// and --kubeconfig (for --watches: plurals are found through discovery)
// unless the command has its own, registered before.
func addSourceFlags(fs *flag.FlagSet, def, configUsage string) *sourceFlags {
	s := &sourceFlags{
		config:  fs.String("config", def, configUsage),
		watches: fs.String("watches", "", "helm-operator's watches.yaml `file` instead of --config: chart entries, each kind's plural found through the API server's discovery"),
	}
	if fs.Lookup("kubeconfig") == nil {
		fs.String("kubeconfig", "", "kubeconfig `file` for --watches (discovery); empty uses $KUBECONFIG or the in-cluster config")
	}
	return s
}

// source returns the reload.Source the flags name; opts are given to
// templates.LoadAll.
func (s *sourceFlags) source(fs *flag.FlagSet, opts templates.Options) (reload.Source, error) {
	if *s.watches == "" {
		return reload.Source{Path: *s.config, Options: opts, Wall: s.wall}, nil
	}
	if flagSet(fs, "config") {
		return reload.Source{}, errors.New("--config and --watches are exclusive")
	}
	rc, err := clientConfig(fs.Lookup("kubeconfig").Value.String())
	if err != nil {
		return reload.Source{}, fmt.Errorf("--watches finds each kind's plural through the API server's discovery: loading kubeconfig: %w", err)
	}
	disco, err := discovery.NewDiscoveryClientForConfig(rc)
	if err != nil {
		return reload.Source{}, err
	}
	return reload.Source{Path: *s.watches, Watches: true, Resolve: discoveryResolver(disco), Options: opts, Wall: s.wall}, nil
}

func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// load loads the source, printing every error.
func (s *sourceFlags) load(fs *flag.FlagSet, opts templates.Options, stderr io.Writer) (*config.Config, []*templates.Set, bool) {
	src, err := s.source(fs, opts)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", fs.Name(), err)
		return nil, nil, false
	}
	cfg, sets, err := src.Load()
	if err != nil {
		printErrors(stderr, err)
		return nil, nil, false
	}
	return cfg, sets, true
}

// discoveryResolver finds a kind's plural in the API server's discovery.
func discoveryResolver(disco discovery.DiscoveryInterface) config.PluralResolver {
	return func(gvk schema.GroupVersionKind) (string, error) {
		list, err := disco.ServerResourcesForGroupVersion(gvk.GroupVersion().String())
		if err != nil {
			return "", fmt.Errorf("finding the plural of %s in discovery (is its CRD installed?): %w", gvk.Kind, err)
		}
		for _, r := range list.APIResources {
			if r.Kind == gvk.Kind && !strings.Contains(r.Name, "/") {
				return r.Name, nil
			}
		}
		return "", fmt.Errorf("%s serves no kind %s (is its CRD installed?)", gvk.GroupVersion(), gvk.Kind)
	}
}

// clusterCapabilities are what a chart sees as .Capabilities on the
// cluster: its version and every group/version and group/version/Kind it
// serves, as helm install asks them.
func clusterCapabilities(rc *rest.Config) (*common.Capabilities, error) {
	disco, err := discovery.NewDiscoveryClientForConfig(rc)
	if err != nil {
		return nil, err
	}
	sv, err := disco.ServerVersion()
	if err != nil {
		return nil, fmt.Errorf("reading the server version: %w", err)
	}
	kv, err := common.ParseKubeVersion(sv.GitVersion)
	if err != nil {
		return nil, fmt.Errorf("server version %q: %w", sv.GitVersion, err)
	}
	_, lists, err := disco.ServerGroupsAndResources()
	if err != nil && !discovery.IsGroupDiscoveryFailedError(err) {
		return nil, fmt.Errorf("reading the served APIs: %w", err)
	}
	caps := common.DefaultCapabilities.Copy()
	caps.KubeVersion = *kv
	var set common.VersionSet
	for _, l := range lists {
		set = append(set, l.GroupVersion)
		for _, r := range l.APIResources {
			set = append(set, l.GroupVersion+"/"+r.Kind)
		}
	}
	if len(set) > 0 {
		caps.APIVersions = set
	}
	return caps, nil
}

// listFlag is a repeatable, comma-separated flag.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }

// Set implements flag.Value.
func (l *listFlag) Set(v string) error {
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			*l = append(*l, s)
		}
	}
	return nil
}
