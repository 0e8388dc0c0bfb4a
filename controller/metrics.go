package controller

import (
	"context"
	"net/url"
	"runtime"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"k8s.io/client-go/tools/metrics"
	"k8s.io/client-go/util/workqueue"

	"stencil.dev/stencil/controller/reconcile"
	"stencil.dev/stencil/controller/registry"
	"stencil.dev/stencil/controller/reload"
	"stencil.dev/stencil/controller/ring"
)

// Metrics holds the Prometheus collectors stencil exports. One value is
// created per process and passed in through Options, so tests can use their
// own registry.
type Metrics struct {
	// Registry is what /metrics serves.
	Registry *prometheus.Registry

	reconcileTotal    *prometheus.CounterVec
	reconcileDuration *prometheus.HistogramVec
	served            *prometheus.GaugeVec
	reloadOK          prometheus.Gauge
	reloadTime        prometheus.Gauge
	buildInfo         *prometheus.GaugeVec
	leader            prometheus.Gauge
	queue             workqueue.MetricsProvider
	// reconcile holds the collectors of what syncs write and render.
	reconcile *reconcile.Metrics
	// ring holds a ring member's collectors (0 outside a ring).
	ring *ring.Metrics
}

// Result label values of stencil_reconcile_total.
const (
	resultSuccess  = "success"
	resultError    = "error"
	resultTerminal = "terminal"
)

// NewMetrics registers stencil's collectors, the Go runtime and process
// collectors, and the workqueue metrics on a new registry.
func NewMetrics() *Metrics {
	reg := prometheus.NewRegistry()
	m := &Metrics{
		Registry: reg,
		reconcileTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "stencil_reconcile_total", Help: "Reconciles by resource and result.",
		}, []string{"resource", "result"}),
		reconcileDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "stencil_reconcile_duration_seconds", Help: "Time taken by one reconcile.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 15),
		}, []string{"resource"}),
		served: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "stencil_resource_served",
			Help: "1 while a configured resource is served (its CRD Established at the configured version) and watched, else 0.",
		}, []string{"resource"}),
		reloadOK: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "stencil_config_last_reload_successful",
			Help: "Whether the last config reload attempt was successful (1) or was rejected (0).",
		}),
		reloadTime: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "stencil_config_last_reload_success_timestamp_seconds",
			Help: "Timestamp of the last successful config load or reload.",
		}),
		buildInfo: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "stencil_build_info",
			Help: "1, labelled with the version of stencil and of Go it was built with.",
		}, []string{"version", "go_version"}),
		leader: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "stencil_leader",
			Help: "1 while this replica may work: it holds the leader-election Lease, runs without leader election, or is a ring member; 0 while it stands by.",
		}),
	}
	compiles := prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "stencil_config_compiles_total",
		Help: "Config compiles in this process: one at start and one per reload tried (render workers compile the controller's snapshot, not counted here).",
	}, func() float64 { return float64(reload.Compiles()) })
	reg.MustRegister(m.reconcileTotal, m.reconcileDuration, m.served, m.reloadOK, m.reloadTime, m.buildInfo, m.leader, compiles,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.queue = newQueueMetrics(reg)
	m.reconcile = reconcile.NewMetrics(reg)
	m.ring = ring.NewMetrics(reg)
	return m
}

// SetBuildInfo sets stencil_build_info for this binary's version.
func (m *Metrics) SetBuildInfo(version string) {
	m.buildInfo.Reset()
	m.buildInfo.WithLabelValues(version, runtime.Version()).Set(1)
}

// setLeader sets stencil_leader: whether this replica works now.
func (m *Metrics) setLeader(leading bool) {
	v := 0.0
	if leading {
		v = 1
	}
	m.leader.Set(v)
}

// ConfigLoaded records a config load or reload attempt: ok says whether
// the config was taken, at is when.
func (m *Metrics) ConfigLoaded(ok bool, at time.Time) {
	if !ok {
		m.reloadOK.Set(0)
		return
	}
	m.reloadOK.Set(1)
	m.reloadTime.Set(float64(at.Unix()))
}

// precreate makes every series for resource exist from start-up, so that
// dashboards and alerts see zeros instead of missing data.
func (m *Metrics) precreate(resource string, kinds []string, rollout bool) {
	for _, r := range []string{resultSuccess, resultError, resultTerminal} {
		m.reconcileTotal.WithLabelValues(resource, r)
	}
	m.reconcileDuration.WithLabelValues(resource)
	m.reconcile.Precreate(resource, kinds, rollout)
}

// setServed sets stencil_resource_served of an entry.
func (m *Metrics) setServed(entry *registry.Parent) {
	v := 0.0
	if entry.Served {
		v = 1
	}
	m.served.WithLabelValues(entry.Label).Set(v)
}

// RegisterClientMetrics routes client-go's REST client metrics
// (rest_client_requests_total, rest_client_request_duration_seconds) into
// m.Registry. client-go accepts this once per process, so cmd calls it.
func (m *Metrics) RegisterClientMetrics() {
	result := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "rest_client_requests_total", Help: "HTTP requests, partitioned by status code, method, and host.",
	}, []string{"code", "method", "host"})
	latency := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "rest_client_request_duration_seconds", Help: "Request latency in seconds, by verb and host.",
		Buckets: prometheus.ExponentialBuckets(0.005, 2, 12),
	}, []string{"verb", "host"})
	m.Registry.MustRegister(result, latency)
	metrics.Register(metrics.RegisterOpts{
		RequestResult:  restResult{result},
		RequestLatency: restLatency{latency},
	})
}

// restResult counts client-go's requests as rest_client_requests_total.
type restResult struct{ v *prometheus.CounterVec }

// Increment counts one request by status code, method and host.
func (r restResult) Increment(_ context.Context, code, method, host string) {
	r.v.WithLabelValues(code, method, host).Inc()
}

// restLatency records client-go's request latency by verb and host.
type restLatency struct{ v *prometheus.HistogramVec }

// Observe records one request's duration; the URL is reduced to its host so
// that object names never become label values.
func (r restLatency) Observe(_ context.Context, verb string, u url.URL, d time.Duration) {
	r.v.WithLabelValues(verb, u.Host).Observe(d.Seconds())
}

// queueMetrics implements workqueue.MetricsProvider with the metric names of
// Kubernetes' own controllers (component-base), without depending on it.
type queueMetrics struct {
	depth, unfinished, longest *prometheus.GaugeVec
	adds, retries              *prometheus.CounterVec
	latency, work              *prometheus.HistogramVec
}

func newQueueMetrics(reg prometheus.Registerer) *queueMetrics {
	buckets := prometheus.ExponentialBuckets(10e-9, 10, 12)
	q := &queueMetrics{
		depth: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Subsystem: "workqueue", Name: "depth", Help: "Current depth of workqueue.",
		}, []string{"name"}),
		adds: prometheus.NewCounterVec(prometheus.CounterOpts{
			Subsystem: "workqueue", Name: "adds_total", Help: "Total number of adds handled by workqueue.",
		}, []string{"name"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Subsystem: "workqueue", Name: "queue_duration_seconds",
			Help: "How long in seconds an item stays in workqueue before being requested.", Buckets: buckets,
		}, []string{"name"}),
		work: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Subsystem: "workqueue", Name: "work_duration_seconds",
			Help: "How long in seconds processing an item from workqueue takes.", Buckets: buckets,
		}, []string{"name"}),
		unfinished: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Subsystem: "workqueue", Name: "unfinished_work_seconds",
			Help: "How many seconds of work has been done that is in progress.",
		}, []string{"name"}),
		longest: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Subsystem: "workqueue", Name: "longest_running_processor_seconds",
			Help: "How many seconds has the longest running processor for workqueue been running.",
		}, []string{"name"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Subsystem: "workqueue", Name: "retries_total", Help: "Total number of retries handled by workqueue.",
		}, []string{"name"}),
	}
	reg.MustRegister(q.depth, q.adds, q.latency, q.work, q.unfinished, q.longest, q.retries)
	return q
}

// NewDepthMetric returns workqueue_depth for the named queue.
func (q *queueMetrics) NewDepthMetric(name string) workqueue.GaugeMetric {
	return q.depth.WithLabelValues(name)
}

// NewAddsMetric returns workqueue_adds_total for the named queue.
func (q *queueMetrics) NewAddsMetric(name string) workqueue.CounterMetric {
	return q.adds.WithLabelValues(name)
}

// NewLatencyMetric returns workqueue_queue_duration_seconds for the named queue.
func (q *queueMetrics) NewLatencyMetric(name string) workqueue.HistogramMetric {
	return q.latency.WithLabelValues(name)
}

// NewWorkDurationMetric returns workqueue_work_duration_seconds for the named queue.
func (q *queueMetrics) NewWorkDurationMetric(name string) workqueue.HistogramMetric {
	return q.work.WithLabelValues(name)
}

// NewUnfinishedWorkSecondsMetric returns workqueue_unfinished_work_seconds for the named queue.
func (q *queueMetrics) NewUnfinishedWorkSecondsMetric(name string) workqueue.SettableGaugeMetric {
	return q.unfinished.WithLabelValues(name)
}

// NewLongestRunningProcessorSecondsMetric returns workqueue_longest_running_processor_seconds for the named queue.
func (q *queueMetrics) NewLongestRunningProcessorSecondsMetric(name string) workqueue.SettableGaugeMetric {
	return q.longest.WithLabelValues(name)
}

// NewRetriesMetric returns workqueue_retries_total for the named queue.
func (q *queueMetrics) NewRetriesMetric(name string) workqueue.CounterMetric {
	return q.retries.WithLabelValues(name)
}

// cachedResources is stencil_cached_resources{resource}: the custom
// resources this replica caches, counted at each scrape (a ring member's
// are its share's); and, in a ring, stencil_ring_cached_outside_share
// {resource}: those of them outside the member's share, which a member
// whose informers watch the share of its view holds none of.
type cachedResources struct {
	c       *Controller
	desc    *prometheus.Desc
	outside *prometheus.Desc
}

func newCachedResources(c *Controller) *cachedResources {
	return &cachedResources{c: c,
		desc: prometheus.NewDesc("stencil_cached_resources",
			"Custom resources in this replica's caches, by configured resource.", []string{"resource"}, nil),
		outside: prometheus.NewDesc("stencil_ring_cached_outside_share",
			"Custom resources in this ring member's caches whose namespace is outside its share, by configured resource.", []string{"resource"}, nil),
	}
}

// Describe implements prometheus.Collector.
func (r *cachedResources) Describe(ch chan<- *prometheus.Desc) {
	ch <- r.desc
	ch <- r.outside
}

// Collect implements prometheus.Collector.
func (r *cachedResources) Collect(ch chan<- prometheus.Metric) {
	rs := r.c.ring
	for _, entry := range r.c.reg.Parents() {
		keys := r.c.reg.Keys(entry.Res.GVR())
		ch <- prometheus.MustNewConstMetric(r.desc, prometheus.GaugeValue, float64(len(keys)), entry.Label)
		if rs == nil {
			continue
		}
		outside := 0
		for _, k := range keys {
			if !rs.Holds(k.Namespace) {
				outside++
			}
		}
		ch <- prometheus.MustNewConstMetric(r.outside, prometheus.GaugeValue, float64(outside), entry.Label)
	}
}
