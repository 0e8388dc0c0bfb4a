package controller

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/klog/v2"
)

// watchFailureWindow is how long after a watch error /readyz reports the
// replica unready; a watch that recovers stops producing errors.
const watchFailureWindow = 30 * time.Second

// health backs /healthz and /readyz (served with /metrics by serve, below).
type health struct {
	// started: the workers started, after the first cache sync.
	started atomic.Bool
	// synced reports whether every running informer has synced; informers
	// start later too (a CRD installed, a config reloaded).
	synced  func() bool
	standby atomic.Bool // waiting for the Lease: ready, but not working
	// lastWatchError is the Unix nanoseconds of the latest watch failure.
	lastWatchError atomic.Int64
}

func (h *health) watchFailed(t time.Time) { h.lastWatchError.Store(t.UnixNano()) }

// ready reports nil once every informer has synced and no watch failed recently.
func (h *health) ready(now time.Time) error {
	if h.standby.Load() {
		return nil
	}
	if !h.started.Load() || (h.synced != nil && !h.synced()) {
		return errors.New("informer caches not synced")
	}
	if last := h.lastWatchError.Load(); last != 0 && now.Sub(time.Unix(0, last)) < watchFailureWindow {
		return fmt.Errorf("a watch failed %s ago", now.Sub(time.Unix(0, last)).Round(time.Second))
	}
	return nil
}

// serve starts the metrics and health servers; the returned func stops them.
func (c *Controller) serve(ctx context.Context) (func(), error) {
	var servers []*http.Server
	start := func(addr string, mux *http.ServeMux, tlsConfig *tls.Config) error {
		if addr == "" {
			return nil
		}
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return fmt.Errorf("listening on %s: %w", addr, err)
		}
		if tlsConfig != nil {
			ln = tls.NewListener(ln, tlsConfig)
		}
		srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		servers = append(servers, srv)
		go func() {
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				klog.FromContext(ctx).Error(err, "HTTP server stopped", "addr", addr)
			}
		}()
		return nil
	}
	stop := func() {
		for _, s := range servers {
			shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			_ = s.Shutdown(shutdownCtx)
			cancel()
		}
	}

	metrics := http.NewServeMux()
	var handler http.Handler = promhttp.HandlerFor(c.opts.Metrics.Registry, promhttp.HandlerOpts{})
	var metricsTLSConfig *tls.Config
	if c.opts.MetricsSecure {
		if c.opts.Kube == nil {
			return func() {}, errors.New("secure metrics need Options.Kube (token and access reviews)")
		}
		cfg, err := metricsTLS(c.opts.MetricsCertDir)
		if err != nil {
			return func() {}, err
		}
		metricsTLSConfig = cfg
		auth := &metricsAuth{tokens: c.opts.Kube.AuthenticationV1().TokenReviews(), access: c.opts.Kube.AuthorizationV1().SubjectAccessReviews(), now: time.Now}
		handler = auth.wrap(handler)
	}
	metrics.Handle("/metrics", handler)
	healthMux := http.NewServeMux()
	healthMux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	healthMux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if err := c.health.ready(time.Now()); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	if c.opts.MetricsAddr != "" && c.opts.MetricsAddr == c.opts.HealthAddr {
		metrics.Handle("/healthz", healthMux)
		metrics.Handle("/readyz", healthMux)
		err := start(c.opts.MetricsAddr, metrics, metricsTLSConfig)
		return stop, err
	}
	if err := start(c.opts.MetricsAddr, metrics, metricsTLSConfig); err != nil {
		return stop, err
	}
	if err := start(c.opts.HealthAddr, healthMux, nil); err != nil {
		stop()
		return func() {}, err
	}
	return stop, nil
}
