package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/klog/v2"

	"stencil.dev/stencil/controller"
	"stencil.dev/stencil/controller/ha"
	"stencil.dev/stencil/templates"
)

// runFlags are the flags of "stencil run".
type runFlags struct {
	fs                                  *flag.FlagSet
	kubeconfig, namespace               string
	src                                 *sourceFlags
	workers, burst                      int
	qps                                 float64
	leaderElect, manageCRDs             bool
	metricsSecure                       bool
	metricsCertDir                      string
	leaseNamespace, leaseName, ringName string
	metricsAddr, healthAddr             string
	resync, configPoll                  time.Duration
	lease                               ha.Timings
	loggingFormat                       string
	// verbosity is klog's -v, which the JSON logger applies too.
	verbosity int
}

// parseRunFlags parses the flags of "stencil run"; done says the command
// ends with status (help, or bad usage). Help, usage errors and deprecation
// warnings go to stderr.
func parseRunFlags(args []string, stderr io.Writer) (f runFlags, status int, done bool) {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	// hidden are accepted but not listed by -h: the old names, and klog's
	// flags other than -v and -vmodule (listed by --help-all).
	hidden := map[string]bool{}
	var helpAll bool
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: stencil run --config stencil.yaml | --watches watches.yaml [--kubeconfig F] [--namespace NS] [--workers N] [--qps Q --burst B] [--leader-elect | --ring NAME] [--manage-crds] [--default-identity tenant:NAME] [--metrics-bind-address :8080] [--health-probe-bind-address :8081] [--resync 10m] [--config-poll 5s] [--logging-format text|json] [-v N]")
		printDefaults(fs, hidden)
	}
	fs.StringVar(&f.kubeconfig, "kubeconfig", "", "kubeconfig file; empty uses $KUBECONFIG or the in-cluster config")
	f.src = addSourceFlags(fs, "", "path of the stencil config file (this or --watches is required)")
	fs.StringVar(&f.namespace, "namespace", "", "watch only this namespace (default: the namespaces each entry lists, or all)")
	fs.IntVar(&f.workers, "workers", controller.DefaultWorkers, "parallel reconciles")
	fs.Float64Var(&f.qps, "qps", 50, "client-side QPS limit towards the API server")
	fs.IntVar(&f.burst, "burst", 100, "client-side burst limit towards the API server")
	fs.BoolVar(&f.leaderElect, "leader-elect", false, "run only while holding a Lease, so several replicas can run")
	fs.StringVar(&f.leaseNamespace, "leader-elect-namespace", envOr("POD_NAMESPACE", "default"), "namespace of the leader-election Lease")
	fs.StringVar(&f.leaseName, "leader-elect-id", "stencil", "name of the leader-election Lease; replicas that split the work use distinct names")
	fs.StringVar(&f.ringName, "ring", "", "run as a member of the ring of replicas NAME, which split the namespaces; its Leases live in --leader-elect-namespace (exclusive with --leader-elect)")
	fs.DurationVar(&f.lease.Lease, "leader-elect-lease-duration", ha.DefaultTimings.Lease, "how long a Lease (--leader-elect, --ring) holds without renewal; a standby replica takes over after it")
	fs.DurationVar(&f.lease.Renew, "leader-elect-renew-deadline", ha.DefaultTimings.Renew, "how long the holder keeps trying to renew its Lease before it stops writing and gives it up")
	fs.DurationVar(&f.lease.Retry, "leader-elect-retry-period", ha.DefaultTimings.Retry, "how often a Lease is renewed, or tried for")
	fs.StringVar(&f.metricsAddr, "metrics-bind-address", ":8080", "listen address of /metrics; empty disables it")
	fs.StringVar(&f.healthAddr, "health-probe-bind-address", ":8081", "listen address of /healthz and /readyz; empty disables it")
	// The names before kubebuilder's, kept for one release.
	deprecatedAlias(fs, hidden, "metrics-addr", "metrics-bind-address")
	deprecatedAlias(fs, hidden, "health-addr", "health-probe-bind-address")
	fs.DurationVar(&f.resync, "resync", 10*time.Minute, "period of the full resync that re-checks every resource")
	fs.DurationVar(&f.configPoll, "config-poll", 5*time.Second, "how often the config file and templates are checked for changes (SIGHUP checks at once)")
	fs.StringVar(&f.loggingFormat, "logging-format", loggingText, "log format: text (klog's) or json (one JSON object per line, as Kubernetes' components write it)")
	fs.BoolVar(&f.metricsSecure, "metrics-secure", false, "serve /metrics over HTTPS to callers the API server authenticates and lets get /metrics (TokenReview, SubjectAccessReview)")
	fs.StringVar(&f.metricsCertDir, "metrics-cert-dir", "", "directory of tls.crt and tls.key for --metrics-secure; empty makes a self-signed certificate at start")
	fs.BoolVar(&f.manageCRDs, "manage-crds", false, "apply the CRDs the config's schemas generate, at start and on every reload (never deleting one)")
	fs.BoolVar(&helpAll, "help-all", false, "list every flag, klog's too (-logtostderr, -log_file, ...)")
	klogHidden := addKlogFlags(fs, hidden)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return f, 0, true
		}
		return f, 2, true
	}
	if helpAll {
		for _, name := range klogHidden {
			delete(hidden, name)
		}
		fs.Usage()
		return f, 0, true
	}
	if *f.src.config == "" && *f.src.watches == "" || fs.NArg() > 0 {
		fs.Usage()
		return f, 2, true
	}
	if f.ringName != "" && f.leaderElect {
		fmt.Fprintln(stderr, "--ring and --leader-elect are exclusive: in a ring every replica works, on its share of the namespaces")
		return f, 2, true
	}
	if errs := validation.IsDNS1123Label(f.ringName); f.ringName != "" && len(errs) > 0 {
		fmt.Fprintf(stderr, "--ring %q: %s\n", f.ringName, strings.Join(errs, "; "))
		return f, 2, true
	}
	if f.loggingFormat != loggingText && f.loggingFormat != loggingJSON {
		fmt.Fprintf(stderr, "--logging-format %q: want %s or %s\n", f.loggingFormat, loggingText, loggingJSON)
		return f, 2, true
	}
	if v, err := strconv.Atoi(fs.Lookup("v").Value.String()); err == nil {
		f.verbosity = v
	}
	if err := f.lease.Validate(); err != nil {
		fmt.Fprintf(stderr, "--leader-elect-lease-duration %s, --leader-elect-renew-deadline %s, --leader-elect-retry-period %s: %v\n",
			f.lease.Lease, f.lease.Renew, f.lease.Retry, err)
		return f, 2, true
	}
	f.fs = fs
	return f, 0, false
}

// deprecatedAlias registers old as a hidden name of the flag named current:
// it sets the same value and, the first time it is used, warns on the flag
// set's output that it is deprecated.
func deprecatedAlias(fs *flag.FlagSet, hidden map[string]bool, old, current string) {
	target := fs.Lookup(current)
	warned := false
	fs.Func(old, "deprecated: use --"+current, func(v string) error {
		if !warned {
			warned = true
			fmt.Fprintf(fs.Output(), "warning: --%s is deprecated and will be removed in a later release; use --%s\n", old, current)
		}
		return target.Value.Set(v)
	})
	hidden[old] = true
}

// addKlogFlags adds klog's flags to fs, every one but -v and -vmodule
// hidden: they are accepted as before, and -h lists only what a stencil
// user sets (--help-all lists them all). It returns the hidden names.
func addKlogFlags(fs *flag.FlagSet, hidden map[string]bool) []string {
	var names []string
	kfs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(kfs)
	kfs.VisitAll(func(f *flag.Flag) {
		fs.Var(f.Value, f.Name, f.Usage)
		fs.Lookup(f.Name).DefValue = f.DefValue
		if f.Name != "v" && f.Name != "vmodule" {
			hidden[f.Name] = true
			names = append(names, f.Name)
		}
	})
	return names
}

// printDefaults prints the flags of fs as flag.PrintDefaults does, leaving
// out the hidden ones.
func printDefaults(fs *flag.FlagSet, hidden map[string]bool) {
	shown := flag.NewFlagSet(fs.Name(), flag.ContinueOnError)
	shown.SetOutput(fs.Output())
	fs.VisitAll(func(f *flag.Flag) {
		if hidden[f.Name] {
			return
		}
		shown.Var(f.Value, f.Name, f.Usage)
		// The default, not what was parsed so far (stencil run --workers 8 -h).
		shown.Lookup(f.Name).DefValue = f.DefValue
	})
	shown.PrintDefaults()
}

// runCommand implements "stencil run". It returns the process exit status:
// 0 after a clean shutdown, 2 for bad flags or config, 1 for anything else.
func runCommand(args []string) int {
	setGCPercent()
	f, status, done := parseRunFlags(args, os.Stderr)
	if done {
		return status
	}
	if err := setupLogging(f.loggingFormat, f.verbosity, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, err)
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

	src, err := f.src.source(f.fs, templates.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	err = controller.Serve(ctx, controller.ServeOptions{
		Source: src, Kubeconfig: f.kubeconfig, QPS: float32(f.qps), Burst: f.burst, Version: version, ConfigPoll: f.configPoll,
		Controller: controller.Options{
			Namespace: f.namespace, Workers: f.workers, ResyncPeriod: f.resync,
			LeaderElection: controller.LeaderElection{Enabled: f.leaderElect, Namespace: f.leaseNamespace, Name: f.leaseName},
			LeaseTimings:   f.lease,
			Ring:           controller.Ring{Name: f.ringName, Namespace: f.leaseNamespace},
			MetricsAddr:    f.metricsAddr, HealthAddr: f.healthAddr,
			ManageCRDs: f.manageCRDs, MetricsSecure: f.metricsSecure, MetricsCertDir: f.metricsCertDir,
		},
	})
	var cfgErr *controller.ConfigError
	switch {
	case errors.As(err, &cfgErr):
		fmt.Fprintln(os.Stderr, err)
		return 2
	case err != nil:
		logger.Error(err, "Stencil stopped")
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

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
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
