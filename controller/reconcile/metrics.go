package reconcile

import (
	"github.com/prometheus/client_golang/prometheus"
	"stencil.dev/stencil/controller/reconcile/rollout"
)

// Metrics holds the collectors of what syncs write and render. The
// controller registers them with its own (NewMetrics), beside the queue's
// and the ring's.
type Metrics struct {
	childWrites      *prometheus.CounterVec
	renders          *prometheus.CounterVec
	statusPatches    *prometheus.CounterVec
	renderErrors     *prometheus.CounterVec
	budgetExceeded   *prometheus.CounterVec
	workersLost      *prometheus.CounterVec
	dryRuns          *prometheus.CounterVec
	rolloutResources *prometheus.GaugeVec
	rolloutHalted    *prometheus.GaugeVec
}

// Verb label values of stencil_child_writes_total.
const (
	verbCreate = "create"
	verbUpdate = "update"
	verbDelete = "delete"
)

// NewMetrics creates the reconciler's collectors and registers them on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		childWrites: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "stencil_child_writes_total", Help: "Writes to child objects by resource, kind and verb.",
		}, []string{"resource", "kind", "verb"}),
		renders: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "stencil_renders_total", Help: "Renders of custom resources, failed ones included: with stencil_reconcile_total, how many syncs rendered.",
		}, []string{"resource"}),
		statusPatches: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "stencil_status_patches_total", Help: "Status patches of custom resources.",
		}, []string{"resource"}),
		renderErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "stencil_render_errors_total", Help: "Template render failures.",
		}, []string{"resource"}),
		budgetExceeded: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "stencil_render_budget_exceeded_total", Help: "Renders stopped by their render budget (renderBudget).",
		}, []string{"resource"}),
		workersLost: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "stencil_render_workers_lost_total",
			Help: "Renders whose worker was lost from outside the render twice in a row (a signal stencil did not send, such as the OOM killer's): retried with backoff, not blamed on the resource.",
		}, []string{"resource"}),
		dryRuns: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "stencil_drift_dry_runs_total",
			Help: "Dry-run applies made where field ownership could not tell whether a child drifted, by kind.",
		}, []string{"kind"}),
		rolloutResources: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "stencil_rollout_resources",
			Help: "Resources of an entry with a rollout, by where they stand in moving to its current templates: pending, rolling, done, failed.",
		}, []string{"resource", "state"}),
		rolloutHalted: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "stencil_rollout_halted",
			Help: "1 while an entry's rollout is halted: maxFailed moved resources failed and others wait.",
		}, []string{"resource"}),
	}
	reg.MustRegister(m.childWrites, m.renders, m.statusPatches, m.renderErrors, m.budgetExceeded, m.workersLost, m.dryRuns, m.rolloutResources, m.rolloutHalted)
	return m
}

// Precreate makes every series of an entry (its label, its child kinds'
// names, and with a rollout the rollout's) exist from start-up, so that
// dashboards and alerts see zeros instead of missing data.
func (m *Metrics) Precreate(resource string, kinds []string, withRollout bool) {
	m.renders.WithLabelValues(resource)
	m.statusPatches.WithLabelValues(resource)
	m.renderErrors.WithLabelValues(resource)
	m.budgetExceeded.WithLabelValues(resource)
	m.workersLost.WithLabelValues(resource)
	for _, k := range kinds {
		for _, v := range []string{verbCreate, verbUpdate, verbDelete} {
			m.childWrites.WithLabelValues(resource, k, v)
		}
		m.dryRuns.WithLabelValues(k)
	}
	if !withRollout {
		return
	}
	for _, st := range rollout.Reported {
		m.rolloutResources.WithLabelValues(resource, st.String())
	}
	m.rolloutHalted.WithLabelValues(resource)
}

func boolGauge(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
