package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	authorizationv1 "k8s.io/client-go/kubernetes/typed/authorization/v1"
	coordinationv1 "k8s.io/client-go/kubernetes/typed/coordination/v1"
	corev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"stencil.dev/stencil/controller"
	"stencil.dev/stencil/controller/ha"
	"stencil.dev/stencil/controller/reload"
	"stencil.dev/stencil/templates"
)

// runCommand implements "stencil run". It returns the process exit status:
// 0 after a clean shutdown, 2 for bad flags or config, 1 for anything else.
func runCommand(args []string) int {
	setGCPercent()
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: stencil run --config stencil.yaml | --watches watches.yaml [--kubeconfig F] [--namespace NS] [--workers N] [--qps Q --burst B] [--leader-elect | --ring NAME] [--metrics-addr :8080] [--health-addr :8081] [--resync 10m] [--config-poll 5s] [-v N]")
		fs.PrintDefaults()
	}
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig file; empty uses $KUBECONFIG or the in-cluster config")
	srcFlags := addSourceFlags(fs, "", "path of the stencil config file (this or --watches is required)")
	configPath := srcFlags.config
	namespace := fs.String("namespace", "", "watch only this namespace (default: the namespaces each entry lists, or all)")
	workers := fs.Int("workers", controller.DefaultWorkers, "parallel reconciles")
	qps := fs.Float64("qps", 50, "client-side QPS limit towards the API server")
	burst := fs.Int("burst", 100, "client-side burst limit towards the API server")
	leaderElect := fs.Bool("leader-elect", false, "run only while holding a Lease, so several replicas can run")
	leaseNamespace := fs.String("leader-elect-namespace", envOr("POD_NAMESPACE", "default"), "namespace of the leader-election Lease")
	leaseName := fs.String("leader-elect-id", "stencil", "name of the leader-election Lease; replicas that split the work use distinct names")
	ringName := fs.String("ring", "", "run as a member of the ring of replicas NAME, which split the namespaces; its Leases live in --leader-elect-namespace (exclusive with --leader-elect)")
	metricsAddr := fs.String("metrics-addr", ":8080", "listen address of /metrics; empty disables it")
	healthAddr := fs.String("health-addr", ":8081", "listen address of /healthz and /readyz; empty disables it")
	resync := fs.Duration("resync", 10*time.Minute, "period of the full resync that re-checks every resource")
	configPoll := fs.Duration("config-poll", 5*time.Second, "how often the config file and templates are checked for changes (SIGHUP checks at once)")
	klog.InitFlags(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if *configPath == "" && *srcFlags.watches == "" || fs.NArg() > 0 {
		fs.Usage()
		return 2
	}
	if *ringName != "" && *leaderElect {
		fmt.Fprintln(os.Stderr, "--ring and --leader-elect are exclusive: in a ring every replica works, on its share of the namespaces")
		return 2
	}
	if errs := validation.IsDNS1123Label(*ringName); *ringName != "" && len(errs) > 0 {
		fmt.Fprintf(os.Stderr, "--ring %q: %s\n", *ringName, strings.Join(errs, "; "))
		return 2
	}

	// Helm's libraries (chart mode) warn through the standard library's
	// log: into klog, with the rest.
	klog.CopyStandardLogTo("WARNING")
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	logger := klog.FromContext(ctx)
	ctx = klog.NewContext(ctx, logger)
	go exitOnSecondSignal(ctx, stop)

	metrics := controller.NewMetrics()
	metrics.RegisterClientMetrics()
	// A config file is checked before the cluster is touched; a watches
	// file and every chart need discovery (plurals, .Capabilities).
	if *configPath != "" && *srcFlags.watches == "" {
		if _, _, err := reload.Load(*configPath); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
	}
	restConfig, err := clientConfig(*kubeconfig)
	if err != nil {
		logger.Error(err, "Loading kubeconfig")
		return 1
	}
	opts := templates.Options{}
	if caps, err := clusterCapabilities(restConfig); err != nil {
		logger.Error(err, "Reading the cluster's capabilities for charts; they see Helm's defaults")
	} else {
		opts.Capabilities = caps
	}
	src, err := srcFlags.source(fs, opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	// The watcher fingerprints the files before they are loaded: a change
	// in between is picked up by its first poll.
	watcher := reload.New(src, *configPoll, nil, metrics.ConfigLoaded)
	cfg, sets, err := src.Load()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	metrics.ConfigLoaded(true, time.Now())

	restConfig.QPS, restConfig.Burst = float32(*qps), *burst
	restConfig.UserAgent = "stencil/" + version
	// Every write asks the fence again just before it is sent (see
	// controller.WriteGate).
	gate := ha.NewWriteGate()
	restConfig.Wrap(gate.Wrap)

	dyn, err := dynamic.NewForConfig(restConfig)
	if err != nil {
		logger.Error(err, "Building dynamic client")
		return 1
	}
	kube, err := newGroupClients(restConfig)
	if err != nil {
		logger.Error(err, "Building typed clients")
		return 1
	}
	disco, err := discovery.NewDiscoveryClientForConfig(restConfig)
	if err != nil {
		logger.Error(err, "Building discovery client")
		return 1
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disco))
	meta, err := metadata.NewForConfig(restConfig)
	if err != nil {
		logger.Error(err, "Building metadata client")
		return 1
	}

	c, err := controller.New(ctx, controller.Options{
		Config: cfg, Sets: sets, Dynamic: dyn, Metadata: meta, Kube: kube, Mapper: mapper, Metrics: metrics,
		Namespace: *namespace, Workers: *workers, ResyncPeriod: *resync,
		LeaderElection: controller.LeaderElection{Enabled: *leaderElect, Namespace: *leaseNamespace, Name: *leaseName},
		Ring:           controller.Ring{Name: *ringName, Namespace: *leaseNamespace},
		WriteGate:      gate,
		MetricsAddr:    *metricsAddr, HealthAddr: *healthAddr,
	})
	if err != nil {
		logger.Error(err, "Starting controller")
		return 1
	}
	watcher.Apply = c.Reconfigure
	go watcher.Run(ctx)
	logger.Info("Starting stencil", "version", version, "config", src.Path, "resources", len(cfg.Resources))
	if err := c.Run(ctx); err != nil {
		logger.Error(err, "Controller stopped")
		klog.Flush()
		return 1
	}
	logger.Info("Stopped cleanly")
	klog.Flush()
	return 0
}

// exitOnSecondSignal waits for the first SIGTERM or SIGINT (ctx done; the
// process drains) and exits with status 1 at the second, without waiting.
func exitOnSecondSignal(ctx context.Context, stop context.CancelFunc) {
	<-ctx.Done()
	second := make(chan os.Signal, 1)
	signal.Notify(second, syscall.SIGTERM, os.Interrupt)
	stop()
	<-second
	klog.FromContext(ctx).Info("Second signal: exiting at once, without draining")
	klog.Flush()
	os.Exit(1)
}

// clientConfig loads the kubeconfig the usual way: the flag, then
// $KUBECONFIG, then the in-cluster config.
func clientConfig(path string) (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if path != "" {
		rules.ExplicitPath = path
	}
	return clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// groupClients is controller.Kube built from the group clients it needs,
// not the whole clientset (see controller.Kube for why).
type groupClients struct {
	core  corev1.CoreV1Interface
	coord coordinationv1.CoordinationV1Interface
	authz authorizationv1.AuthorizationV1Interface
}

// CoreV1 returns the core group client (events).
func (g groupClients) CoreV1() corev1.CoreV1Interface { return g.core }

// CoordinationV1 returns the coordination group client (the Lease).
func (g groupClients) CoordinationV1() coordinationv1.CoordinationV1Interface { return g.coord }

// AuthorizationV1 returns the authorization group client (a reload's
// access reviews).
func (g groupClients) AuthorizationV1() authorizationv1.AuthorizationV1Interface { return g.authz }

func newGroupClients(cfg *rest.Config) (groupClients, error) {
	core, err := corev1.NewForConfig(cfg)
	if err != nil {
		return groupClients{}, fmt.Errorf("core client: %w", err)
	}
	coord, err := coordinationv1.NewForConfig(cfg)
	if err != nil {
		return groupClients{}, fmt.Errorf("coordination client: %w", err)
	}
	authz, err := authorizationv1.NewForConfig(cfg)
	if err != nil {
		return groupClients{}, fmt.Errorf("authorization client: %w", err)
	}
	return groupClients{core: core, coord: coord, authz: authz}, nil
}

// gcPercent is the GOGC the controller runs with unless GOGC is set. Its
// heap is mostly the informer caches, which live as long as the process, so
// the default 100 keeps a second cache's worth of headroom that only
// short-lived sync garbage uses; 50 halves that headroom for about twice
// the (small) collection work. docs/operating.md (Memory) has the figures.
const gcPercent = 50

func setGCPercent() {
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(gcPercent)
	}
}
