package controller

import (
	"context"
	"fmt"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"stencil.dev/stencil/config"
	"stencil.dev/stencil/controller/ha"
	"stencil.dev/stencil/controller/reload"
	"stencil.dev/stencil/renderworker"
	"stencil.dev/stencil/templates"
)

// ServeOptions is what "stencil run" hands Serve: where the config comes
// from, how to reach the cluster, and the controller's Options.
type ServeOptions struct {
	// Source is where the config comes from. Serve sets its Options (the
	// cluster's capabilities, which charts see) and its Wall.
	Source reload.Source
	// Kubeconfig is the kubeconfig file; empty uses $KUBECONFIG or the
	// in-cluster config.
	Kubeconfig string
	// QPS and Burst are the client-side limits towards the API server.
	QPS   float32
	Burst int
	// Version is stencil's, for the user agent, the logs and
	// stencil_build_info.
	Version string
	// ConfigPoll is how often the config's files are checked for changes.
	ConfigPoll time.Duration
	// Controller is the controller's Options; Serve sets the config, the
	// sets, the clients, the metrics and the wall.
	Controller Options
}

// ConfigError is a config that did not load (the process exits 2 for it,
// and prints it as it is: it names the file, entry and field).
type ConfigError struct{ Err error }

// Error returns the config's error.
func (e *ConfigError) Error() string { return e.Err.Error() }

// Unwrap returns the config's error.
func (e *ConfigError) Unwrap() error { return e.Err }

// Serve runs the controller process until ctx ends: the config checked
// before the cluster is touched, the cluster's capabilities read, the
// render wall started, the config loaded and watched for changes, and the
// controller run. It returns nil after a clean shutdown.
//
// The order is the point: a config file that does not load fails before
// any client exists, and the watcher fingerprints the files before they
// are loaded, so a change in between is picked up by its first poll.
func Serve(ctx context.Context, o ServeOptions) error {
	logger := klog.FromContext(ctx)
	metrics := NewMetrics()
	metrics.RegisterClientMetrics()
	metrics.SetBuildInfo(o.Version)
	// The watcher fingerprints the files first: a change made while
	// they load is seen by its first poll.
	watcher := reload.New(o.Source, o.ConfigPoll, nil, metrics.ConfigLoaded)
	// A config file is compiled, once, before the cluster is touched; a
	// watches file needs discovery (plurals) to compile.
	var (
		cfg  *config.Config
		sets []*templates.Set
		err  error
	)
	if !o.Source.Watches {
		if cfg, sets, err = o.Source.Load(); err != nil {
			return &ConfigError{err}
		}
	}
	restConfig, err := ClientConfig(o.Kubeconfig)
	if err != nil {
		return fmt.Errorf("loading kubeconfig: %w", err)
	}
	if caps, err := ClusterCapabilities(restConfig); err != nil {
		logger.Error(err, "Reading the cluster's capabilities for charts; they see Helm's defaults")
	} else {
		o.Source.Options = templates.Options{Capabilities: caps}
	}
	wall := renderworker.NewWall(o.Controller.Workers, logger, metrics.Registry)
	if wall != nil {
		defer wall.Close()
		o.Source.Wall = wall
	}
	watcher.Source = o.Source
	if cfg == nil {
		if cfg, sets, err = o.Source.Load(); err != nil {
			return &ConfigError{err}
		}
	} else {
		o.Source.Attach(cfg, sets)
	}
	if wall != nil {
		wall.Current(sets)
	}
	metrics.ConfigLoaded(true, time.Now())

	restConfig.QPS, restConfig.Burst = o.QPS, o.Burst
	restConfig.UserAgent = "stencil/" + o.Version
	opts := o.Controller
	opts.Config, opts.Sets, opts.Metrics, opts.Wall = cfg, sets, metrics, wall
	c, err := newForConfig(ctx, restConfig, opts)
	if err != nil {
		return fmt.Errorf("starting the controller: %w", err)
	}
	watcher.Apply = c.Reconfigure
	go watcher.Run(ctx)
	logger.Info("Starting stencil", "version", o.Version, "config", o.Source.Path, "resources", len(cfg.Resources))
	if err := c.Run(ctx); err != nil {
		return fmt.Errorf("controller stopped: %w", err)
	}
	return nil
}

// newForConfig builds a Controller whose clients are made from rc, with
// the write fence in their transport: every write asks it again just
// before it is sent (ha.WriteGate). The gate is put in here, not by the
// caller, so that no caller can build a controller whose writes skip it.
// Options' clients and WriteGate are set from rc; rc is not changed.
func newForConfig(ctx context.Context, rc *rest.Config, opts Options) (*Controller, error) {
	rc = rest.CopyConfig(rc)
	gate := ha.NewWriteGate()
	rc.Wrap(gate.Wrap)
	cl, err := NewClients(rc)
	if err != nil {
		return nil, err
	}
	kube, err := newKube(rc)
	if err != nil {
		return nil, fmt.Errorf("building typed clients: %w", err)
	}
	opts.Metadata, opts.Kube, opts.Mapper, opts.WriteGate = cl.Metadata, kube, cl.Mapper, gate
	// Children are written by the dynamic client, as stencil, or by the
	// impersonating ones, as an entry's identity: one rate limiter for
	// both, so that writing as tenants does not double what --qps allows.
	writes := rest.CopyConfig(rc)
	writes.RateLimiter = WriteLimiter(rc)
	if opts.Dynamic, err = dynamic.NewForConfig(writes); err != nil {
		return nil, fmt.Errorf("building dynamic client: %w", err)
	}
	imp, err := NewImpersonators(writes)
	if err != nil {
		return nil, err
	}
	opts.Impersonate = imp.Client
	return New(ctx, opts)
}
