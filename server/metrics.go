package server

import (
	"github.com/prometheus/client_golang/prometheus"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/store"
	"github.com/omega-cell/omega/txn"
)

// Metrics are the server's Prometheus metrics: commits, conflicts and
// claims by component, the commit latency, the watchers, and the machines
// by state.
type Metrics struct {
	commits   *prometheus.CounterVec // by component and result (committed, conflicted, error)
	conflicts *prometheus.CounterVec // conflicting operations, by component
	claims    *prometheus.CounterVec // claims attempted and conflicted, by component
	latency   prometheus.Histogram   // commit latency, seconds
	watchers  prometheus.Gauge       // open watch streams
	machines  *prometheus.GaugeVec   // by state, at scrape time
	st        *store.Store
}

// NewMetrics registers the metrics of a server of st with reg.
func NewMetrics(reg prometheus.Registerer, st *store.Store) *Metrics {
	m := &Metrics{
		commits: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "omega", Name: "commits_total",
			Help: "Transactions evaluated, by component and result (committed: nothing conflicted; conflicted: at least one operation did; error: refused).",
		}, []string{"component", "result"}),
		conflicts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "omega", Name: "conflicting_operations_total",
			Help: "Operations that conflicted, by component.",
		}, []string{"component"}),
		claims: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "omega", Name: "claims_total",
			Help: "Claims sent, by component and result (committed, conflicted).",
		}, []string{"component", "result"}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "omega", Name: "commit_seconds",
			Help:    "Time from receiving a transaction to its result (durable when the store syncs).",
			Buckets: prometheus.ExponentialBuckets(0.0002, 2, 16), // 0.2 ms to 6.5 s
		}),
		watchers: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "omega", Name: "watchers",
			Help: "Open watch streams.",
		}),
		st: st,
	}
	reg.MustRegister(m.commits, m.conflicts, m.claims, m.latency, m.watchers, machineCollector{st}, logCollector{st})
	return m
}

// commit records one evaluated (or refused) transaction.
func (m *Metrics) commit(tx *txn.Txn, res txn.Result, err error, seconds float64) {
	if m == nil {
		return
	}
	component := "unknown"
	if tx != nil && tx.Component != "" {
		component = tx.Component
	}
	m.latency.Observe(seconds)
	switch {
	case err != nil:
		m.commits.WithLabelValues(component, "error").Inc()
		return
	case res.Conflicted():
		m.commits.WithLabelValues(component, "conflicted").Inc()
	default:
		m.commits.WithLabelValues(component, "committed").Inc()
	}
	m.conflicts.WithLabelValues(component).Add(float64(res.Conflicts))
	claims := 0
	for i := range tx.Ops {
		if tx.Ops[i].Kind == txn.OpClaim {
			claims++
		}
	}
	if claims > 0 {
		m.claims.WithLabelValues(component, "conflicted").Add(float64(res.ClaimsConflicted))
		m.claims.WithLabelValues(component, "committed").Add(float64(claims - res.ClaimsConflicted))
	}
}

func (m *Metrics) watch(d float64) {
	if m != nil {
		m.watchers.Add(d)
	}
}

// machineCollector counts the machines by state at scrape time, from the
// store's newest state.
type machineCollector struct{ st *store.Store }

var machinesDesc = prometheus.NewDesc("omega_machines", "Machines by state.", []string{"state"}, nil)

func (c machineCollector) Describe(ch chan<- *prometheus.Desc) { ch <- machinesDesc }

func (c machineCollector) Collect(ch chan<- prometheus.Metric) {
	counts := map[omegav1.MachineState]int{}
	c.st.Snapshot().RangeMachines(func(m *txn.Machine) bool {
		counts[m.State]++
		return true
	})
	for _, s := range []omegav1.MachineState{omegav1.MachineState_MACHINE_STATE_UP, omegav1.MachineState_MACHINE_STATE_DRAINING, omegav1.MachineState_MACHINE_STATE_DOWN} {
		ch <- prometheus.MustNewConstMetric(machinesDesc, prometheus.GaugeValue, float64(counts[s]), s.String())
	}
}

// logCollector reports the store's log and checkpoints at scrape time.
type logCollector struct{ st *store.Store }

var (
	checkpointsDesc = prometheus.NewDesc("omega_store_checkpoints_total", "Checkpoints of the state written to pebble since the store opened.", nil, nil)
	ckRevisionDesc  = prometheus.NewDesc("omega_store_checkpoint_revision", "The revision pebble's checkpoint holds; the log holds every one after it.", nil, nil)
	ckSecondsDesc   = prometheus.NewDesc("omega_store_last_checkpoint_seconds", "How long the last checkpoint took.", nil, nil)
	segmentsDesc    = prometheus.NewDesc("omega_store_log_segments", "Files of the store's log.", nil, nil)
	logBytesDesc    = prometheus.NewDesc("omega_store_log_bytes_since_checkpoint", "Log bytes written since the last checkpoint began (an open after a crash replays about this much).", nil, nil)
)

func (c logCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{checkpointsDesc, ckRevisionDesc, ckSecondsDesc, segmentsDesc, logBytesDesc} {
		ch <- d
	}
}

func (c logCollector) Collect(ch chan<- prometheus.Metric) {
	ls := c.st.LogStats()
	ch <- prometheus.MustNewConstMetric(checkpointsDesc, prometheus.CounterValue, float64(ls.Checkpoints))
	ch <- prometheus.MustNewConstMetric(ckRevisionDesc, prometheus.GaugeValue, float64(ls.CheckpointRevision))
	ch <- prometheus.MustNewConstMetric(ckSecondsDesc, prometheus.GaugeValue, ls.LastCheckpoint.Seconds())
	ch <- prometheus.MustNewConstMetric(segmentsDesc, prometheus.GaugeValue, float64(ls.Segments))
	ch <- prometheus.MustNewConstMetric(logBytesDesc, prometheus.GaugeValue, float64(ls.BytesSinceCheckpoint))
}
