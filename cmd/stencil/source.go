package main

// Where the config comes from (--config, or helm-operator's --watches),
// for every subcommand.

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"k8s.io/client-go/discovery"

	"stencil.dev/stencil/config"
	"stencil.dev/stencil/controller"
	"stencil.dev/stencil/controller/reload"
	"stencil.dev/stencil/renderworker"
	"stencil.dev/stencil/templates"
)

// sourceFlags are --config and --watches (exclusive), and
// --default-identity, which every command that loads the config applies
// alike: the role "stencil rbac" prints is the role "stencil run" uses.
type sourceFlags struct {
	config, watches *string
	// defaultIdentity is --default-identity, parsed.
	defaultIdentity *config.Identity
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
	fs.Func("default-identity", "`tenant:NAME`: write the children of every entry without identity as the ServiceAccount NAME in each custom resource's namespace (impersonated)", func(v string) error {
		id, err := config.ParseDefaultIdentity(v)
		s.defaultIdentity = id
		return err
	})
	if fs.Lookup("kubeconfig") == nil {
		fs.String("kubeconfig", "", "kubeconfig `file` for --watches (discovery); empty uses $KUBECONFIG or the in-cluster config")
	}
	return s
}

// source returns the reload.Source the flags name; opts are given to
// templates.LoadAll.
func (s *sourceFlags) source(fs *flag.FlagSet, opts templates.Options) (reload.Source, error) {
	if *s.watches == "" {
		return reload.Source{Path: *s.config, Options: opts, Wall: s.wall, DefaultIdentity: s.defaultIdentity}, nil
	}
	if flagSet(fs, "config") {
		return reload.Source{}, errors.New("--config and --watches are exclusive")
	}
	rc, err := controller.ClientConfig(fs.Lookup("kubeconfig").Value.String())
	if err != nil {
		return reload.Source{}, fmt.Errorf("--watches finds each kind's plural through the API server's discovery: loading kubeconfig: %w", err)
	}
	disco, err := discovery.NewDiscoveryClientForConfig(rc)
	if err != nil {
		return reload.Source{}, err
	}
	return reload.Source{Path: *s.watches, Watches: true, Resolve: controller.DiscoveryResolver(disco), Options: opts, Wall: s.wall,
		DefaultIdentity: s.defaultIdentity}, nil
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
		fmt.Fprintln(stderr, err)
		return nil, nil, false
	}
	return cfg, sets, true
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
