package sim

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/shoaldb/shoal/bench/report"
)

// RealReport is what calibration reads of a real run's report.json (bench/scenario's Report): the
// settings that size the simulated run and, per run, its summary, series, events, decision log and
// join record.
// The per-run types are the shared leaf's (bench/report); the report's envelope is declared here,
// as bench/scenario's carries settings of the node layers (emulated disks) the simulator must not
// import (TestImportsNoNodeLayer).
type RealReport struct {
	Scenario string       `json:"scenario"`
	Policy   string       `json:"policy"`
	Settings RealSettings `json:"settings"`
	Runs     []RealRun    `json:"runs"`
}

// RealSettings are the real run's effective settings.
type RealSettings struct {
	Nodes        int     `json:"nodes"`
	Records      int64   `json:"records"`
	DurationS    float64 `json:"duration_s"`
	WarmupS      float64 `json:"warmup_s"`
	Threads      int     `json:"threads"`
	Splits       int     `json:"splits"`
	ReadFraction float64 `json:"read_fraction"`
	// Pace and OfferedOps: a paced run's share of its warm-up's throughput and the rate that made
	// (0: a closed loop throughout).
	Pace       float64 `json:"pace"`
	OfferedOps float64 `json:"offered_ops_per_s"`
}

// RealRun is one real run: a variant, or the policy on or off.
type RealRun struct {
	PolicyOn bool        `json:"policy_on"`
	Variant  string      `json:"variant"`
	Summary  Summary     `json:"summary"`
	Series   []Point     `json:"series"`
	Events   []EventMark `json:"events"`
	Join     *RealJoin   `json:"join"`
	// Decisions are the autopilot's decisions proposed during the measured workload, at their time
	// from its start (empty in reports written before runs recorded them: then the join's timeline).
	Decisions []RealDecision `json:"decisions"`
}

// Label is the run's variant, or policy=on/off.
func (r RealRun) Label() string {
	if r.Variant != "" {
		return r.Variant
	}
	if r.PolicyOn {
		return "policy=on"
	}
	return "policy=off"
}

// RealDecision is one entry of a real run's decision log, at its time from a reference.
type RealDecision = report.Decision

// RealJoin is a real join's record (the join scenario's score): when it started and took, and the
// decisions made from its start.
type RealJoin = report.JoinReport

// ReadRealReport reads a real run's report.json.
func ReadRealReport(path string) (*RealReport, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("sim: real report: %w", err)
	}
	var r RealReport
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("sim: real report %s: %w", path, err)
	}
	if r.Scenario == "" || len(r.Runs) == 0 {
		return nil, fmt.Errorf("sim: real report %s: no scenario or no runs (is it a `shoal bench scenario` report.json?)", path)
	}
	return &r, nil
}
