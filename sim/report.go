package sim

import (
	"math"
	"sort"
	"time"

	"github.com/shoaldb/shoal/bench/report"

	"github.com/shoaldb/shoal/autopilot/decisions"
	"github.com/shoaldb/shoal/sim/queueing"
)

// The report's JSON has the shape of bench/scenario's report.json (scenario, policy, settings, runs
// with summary, series and events, plots), so that the tools reading real reports read simulated
// ones; Sim adds what only a simulation has.

// Report is report.json.
type Report struct {
	Scenario string      `json:"scenario"`
	Policy   string      `json:"policy"`
	Settings Settings    `json:"settings"`
	Runs     []RunReport `json:"runs"`
	Plots    []string    `json:"plots"`
	Sim      SimInfo     `json:"sim"`
}

// Settings are the run's settings (bench/scenario's fields, plus the simulator's).
type Settings struct {
	Nodes        int     `json:"nodes"`
	Records      int64   `json:"records"`
	DurationS    float64 `json:"duration_s"`
	WarmupS      float64 `json:"warmup_s"`
	Threads      int     `json:"threads"`
	Splits       int     `json:"splits,omitempty"`
	ValueBytes   uint64  `json:"value_bytes"`
	ReadFraction float64 `json:"read_fraction"`
	CacheBytes   int64   `json:"cache_bytes"`
	Device       any     `json:"device"`
	Workload     string  `json:"workload"`
	OpsPerSec    float64 `json:"ops_per_s"`
	Diurnal      float64 `json:"diurnal,omitempty"`
	Seed         uint64  `json:"seed"`
	Params       Params  `json:"params"`
}

// SimInfo is what the simulation cost.
type SimInfo struct {
	WallS           float64 `json:"wall_s"`
	Events          uint64  `json:"events"`
	Snapshots       int     `json:"snapshots"`
	Decisions       int     `json:"decisions"`
	DecisionsPerSec float64 `json:"decisions_per_wall_s"`
}

// A run's summary, seconds and events are the shared report format's (bench/report), so that the
// tools reading real reports read simulated ones.
type (
	Summary    = report.Summary
	Point      = report.Point
	NodeSecond = report.NodeSecond
	EventMark  = report.EventMark
)

// OperatorTimes is how long the succeeded operators of one kind took, submission to success.
type OperatorTimes struct {
	Count int     `json:"count"`
	MeanS float64 `json:"mean_s"`
	MaxS  float64 `json:"max_s"`
}

// RunReport is one run: the policy on or off.
type RunReport struct {
	PolicyOn  bool                     `json:"policy_on"`
	Variant   string                   `json:"variant,omitempty"`
	Summary   Summary                  `json:"summary"`
	Series    []Point                  `json:"series"`
	Events    []EventMark              `json:"events"`
	Operators map[string]OperatorTimes `json:"operators,omitempty"`
	// Reads is where the reads were served at the end of the run (scenarios with replica reads).
	Reads *ReadReport `json:"reads,omitempty"`
	// Stream is the stream job's state accesses by placement (Scenario.Stream).
	Stream *StreamReport `json:"stream,omitempty"`
	// Steps and AtSLO are the SLO search's (Scenario.Ramp).
	Steps []StepReport `json:"steps,omitempty"`
	AtSLO *SLOReport   `json:"at_slo,omitempty"`
}

// ReadReport is how a run's read replicas were placed and loaded at its end: Getafix's memory
// (replicas, and the bytes learners hold) against its makespan (the hottest node's read load,
// against the mean).
type ReadReport struct {
	Learners          int     `json:"learners"`
	LearnerBytes      uint64  `json:"learner_bytes"`
	ReplicasPerRange  float64 `json:"replicas_per_range"` // voters and learners: the effective replication
	HottestNodeReads  float64 `json:"hottest_node_reads_per_s"`
	MeanNodeReads     float64 `json:"mean_node_reads_per_s"`
	HottestNodeUtil   float64 `json:"hottest_node_utilization"` // its offered work over its service rate
	RangesWithLearner int     `json:"ranges_with_learners"`
}

// Decision is a decision-log entry with when it reached its final status (zero: still running at
// the end). Step timings are zero: the executor times the Actuator's calls on the wall clock, and the
// simulated ones return at once (the steps land later, as the snapshots show).
type Decision struct {
	decisions.Entry
	Finished time.Time `json:"finished"`
}

// latencyHist pools the per-second latency mixtures of a run into bins of their exponential rates
// (2 % apart), so that the run's percentiles are the pooled mixture's.
type latencyHist map[int]float64

func (h latencyHist) add(parts []queueing.Part) {
	for _, p := range parts {
		if p.Weight > 0 && p.Rate > 0 {
			h[int(math.Round(math.Log(p.Rate)/math.Log(1.02)))] += p.Weight
		}
	}
}

func (h latencyHist) quantile(q float64) time.Duration {
	bins := make([]int, 0, len(h))
	for b := range h {
		bins = append(bins, b)
	}
	sort.Ints(bins) // a fixed order of summation: the same run gives the same figures
	parts := make([]queueing.Part, 0, len(h))
	for _, b := range bins {
		parts = append(parts, queueing.Part{Weight: h[b], Rate: math.Pow(1.02, float64(b))})
	}
	return queueing.MixtureQuantile(parts, q)
}

func ms(d time.Duration) float64 { return math.Round(float64(d)/1e3) / 1e3 }
