package ring

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics holds the ring's collectors. They exist outside a ring too,
// where they stay 0.
type Metrics struct {
	members         prometheus.Gauge
	share           prometheus.Gauge
	namespaces      prometheus.Gauge
	settled         prometheus.Gauge
	handovers       prometheus.Counter
	handoverSeconds prometheus.Histogram
}

// NewMetrics registers the ring's collectors on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		members: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "stencil_ring_members", Help: "Live members of this replica's ring, as the view it acts on has them (0 outside a ring).",
		}),
		share: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "stencil_ring_share", Help: "Fraction of the cluster's namespaces this ring member holds under the view it acts on (0 outside a ring).",
		}),
		namespaces: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "stencil_ring_namespaces", Help: "Namespaces this ring member holds under the view it acts on (0 outside a ring).",
		}),
		settled: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "stencil_ring_settled", Help: "1 while every live member of this replica's ring published the view it acts on (it writes for its share), else 0.",
		}),
		handovers: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "stencil_ring_handovers_total", Help: "Views of the ring this member adopted and every member published (each a handover of shares).",
		}),
		handoverSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "stencil_ring_handover_duration_seconds", Help: "Time from this member seeing the ring change to every member having adopted the new view.",
			Buckets: prometheus.ExponentialBuckets(0.25, 2, 10),
		}),
	}
	reg.MustRegister(m.members, m.share, m.namespaces, m.settled, m.handovers, m.handoverSeconds)
	return m
}

// set sets the gauges from rs.
func (m *Metrics) set(rs *State) {
	members, held, of := rs.View()
	share := 0.0
	if of > 0 {
		share = float64(held) / float64(of)
	}
	m.members.Set(float64(members))
	m.share.Set(share)
	m.namespaces.Set(float64(held))
	settled := 0.0
	if rs.Settled() {
		settled = 1
	}
	m.settled.Set(settled)
}

// handedOver counts a handover that took took.
func (m *Metrics) handedOver(took time.Duration) {
	m.handovers.Inc()
	m.handoverSeconds.Observe(took.Seconds())
}
