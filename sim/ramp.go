package sim

import (
	"fmt"
	"math"
	"time"

	"github.com/shoaldb/shoal/sim/queueing"
	"github.com/shoaldb/shoal/sim/workload"
)

// Tenant is one tenant of a scenario's key space: Ranges ranges of RecordsPerRange records each,
// read uniformly, taking Ops of the requests (a share of the tenants' sum).
type Tenant struct {
	Name            string
	Ranges          int
	RecordsPerRange int64
	Ops             float64
}

// Ramp is a search for the highest offered rate that meets an SLO, as bench/usage's balancer
// experiment runs it on a real cluster: the run settles for Settle at SettleOps, then offers each of
// Rates (ops/s) in turn for Warm then Measure; a step meets the SLO when the p99 of the requests
// served in its measured window is at most P99 and they are at least MinServed of those offered.
// The throughput at the SLO is the served rate of the last step before the first that misses.
type Ramp struct {
	Settle        time.Duration
	SettleOps     float64
	Rates         []float64
	Warm, Measure time.Duration
	P99           time.Duration
	MinServed     float64
}

// duration is the run's length: the settling and every step.
func (m *Ramp) duration() time.Duration {
	return m.Settle + time.Duration(len(m.Rates))*(m.Warm+m.Measure)
}

// step is the step offered at t (−1 while settling) and whether t is in its measured window.
func (m *Ramp) step(t time.Duration) (int, bool) {
	if t < m.Settle || len(m.Rates) == 0 {
		return -1, false
	}
	per := m.Warm + m.Measure
	i := int((t - m.Settle) / per)
	if i >= len(m.Rates) {
		return len(m.Rates) - 1, false
	}
	return i, (t-m.Settle)-time.Duration(i)*per > m.Warm
}

// At implements workload.Rate.
func (m *Ramp) At(t time.Duration) float64 {
	i, _ := m.step(t)
	if i < 0 {
		return m.SettleOps
	}
	return m.Rates[i]
}

// StepReport is one step of a ramp: what was offered and served in its measured window, the p99 of
// the served requests, whether it met the SLO, and the placement at its end (per tenant, the most
// and fewest of its ranges one live node led; the busiest disk).
type StepReport struct {
	OfferedOps  float64 `json:"offered_ops_per_s"`
	ServedOps   float64 `json:"served_ops_per_s"`
	P99Ms       float64 `json:"p99_ms"`
	Met         bool    `json:"met_slo"`
	LeadMost    []int   `json:"tenant_most_led_by_a_node"`
	LeadFewest  []int   `json:"tenant_fewest_led_by_a_node"`
	MaxDiskBusy float64 `json:"max_disk_busy"`
	Decisions   int     `json:"decisions"` // decided up to the step's end
}

// SLOReport is a ramp's result: the last step before the first that missed the SLO (-1: none met).
type SLOReport struct {
	Step      int     `json:"step"`
	ServedOps float64 `json:"served_ops_per_s"`
	P99Ms     float64 `json:"p99_ms"`
}

// rampRec accumulates a ramp's steps during a run.
type rampRec struct {
	m     *Ramp
	steps []StepReport
	hists []latencyHist
	secs  []float64
}

func newRampRec(m *Ramp) *rampRec {
	r := &rampRec{m: m, steps: make([]StepReport, len(m.Rates)), hists: make([]latencyHist, len(m.Rates)),
		secs: make([]float64, len(m.Rates))}
	for i := range r.hists {
		r.hists[i] = latencyHist{}
	}
	return r
}

// add records a heartbeat of dt seconds at t (parts' weights per second).
func (r *rampRec) add(t time.Duration, s second, dt float64) {
	i, measured := r.m.step(t)
	if !measured {
		return
	}
	st := &r.steps[i]
	st.OfferedOps += (s.ops + s.errors) * dt
	st.ServedOps += s.ops * dt
	r.secs[i] += dt
	parts := make([]queueing.Part, len(s.parts))
	for k, p := range s.parts {
		parts[k] = queueing.Part{Weight: p.Weight * dt, Rate: p.Rate}
	}
	r.hists[i].add(parts)
}

// end closes step i at its end: the placement then.
func (r *rampRec) end(i int, c *Cluster, decided int) {
	st := &r.steps[i]
	st.LeadMost, st.LeadFewest, st.MaxDiskBusy = c.tenantLeaders()
	st.Decisions = decided
}

// report is every step's figures and the throughput at the SLO.
func (r *rampRec) report() ([]StepReport, SLOReport) {
	slo := SLOReport{Step: -1}
	missed := false
	for i := range r.steps {
		st := &r.steps[i]
		offered := st.OfferedOps
		if r.secs[i] > 0 {
			st.OfferedOps = math.Round(st.OfferedOps / r.secs[i])
			st.ServedOps = math.Round(st.ServedOps / r.secs[i])
		}
		st.P99Ms = ms(r.hists[i].quantile(0.99))
		st.Met = r.secs[i] > 0 && st.P99Ms <= ms(r.m.P99) && st.ServedOps*r.secs[i] >= r.m.MinServed*offered
		if st.Met && !missed {
			slo = SLOReport{Step: i, ServedOps: st.ServedOps, P99Ms: st.P99Ms}
		}
		missed = missed || !st.Met
	}
	return r.steps, slo
}

// String is one line a step: "step 3: 12000 offered, 11990 served, p99 4.10 ms (met)".
func (s StepReport) String() string {
	met := "missed"
	if s.Met {
		met = "met"
	}
	return fmt.Sprintf("%.0f offered, %.0f served, p99 %.2f ms (%s); leaders a node per tenant %v..%v, busiest disk %.2f, %d decisions",
		s.OfferedOps, s.ServedOps, s.P99Ms, met, s.LeadFewest, s.LeadMost, s.MaxDiskBusy, s.Decisions)
}

// tenantsDist is the distribution of sc's tenants and the range bounds (records) they give.
func tenantsDist(ts []Tenant) (workload.Tenants, []int64) {
	var d workload.Tenants
	bounds := []int64{0}
	for _, t := range ts {
		for i := 0; i < t.Ranges; i++ {
			bounds = append(bounds, bounds[len(bounds)-1]+t.RecordsPerRange)
		}
		d.Ends = append(d.Ends, bounds[len(bounds)-1])
		d.Ops = append(d.Ops, t.Ops)
	}
	return d, bounds
}
