// Package sim is a discrete-event simulation of a Shoal cluster that runs the real autopilot —
// policies, executor and decision log, unchanged — at sizes one machine cannot run: a thousand nodes,
// a hundred thousand ranges, an hour of load in seconds. The simulated cluster implements
// model.Source and the executor's Actuator (with autopilot.Decommissioner and JoinRecorder), as
// node/autopilothost does for a real one; the autopilot runs inline on the virtual clock (Tick,
// TickReactive and the executor's Reconcile), so a run is a pure function of its scenario and seed.
//
// What it models: nodes (service rate, disk, liveness, drain and decommission, heavy background
// tasks), ranges (replicas and learners, leader, bytes, read and write rates, key samples for load
// splits), snapshot streaming over each node's rate-limited links, the delays of conf changes,
// transfers, splits, merges and elections, and request latency from an M/M/1 queue per node
// (package queueing). Workloads come from package workload. Params holds every figure in one place.
//
// The package owns the simulated cluster, its scenarios and the reports of simulated runs. It must
// never import a layer below the autopilot (kv, replica, server, node, storage, transport: a test
// checks it), never read the wall clock or start goroutines during a run, and never decide anything
// the autopilot decides: it only carries out the steps it is asked for, as a cluster would.
package sim

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/shoaldb/shoal/bench/report"
)

// Write writes report.json, the timelines (throughput.png, latency.png: p99 and p50) and the policy-on run's
// decision log as decisions.json into dir (the policy-off run's as decisions-off.json), creating dir.
func (res *Result) Write(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("sim: %w", err)
	}
	runs := make([]report.Timeline, len(res.Report.Runs))
	for i, r := range res.Report.Runs {
		name := "policy " + map[bool]string{true: "on", false: "off"}[r.PolicyOn]
		if res.Report.Policy == "" {
			name = "run"
		}
		runs[i] = report.Timeline{Name: name, Series: r.Series, Events: r.Events}
	}
	plots, err := report.WriteTimelines(dir, res.Report.Scenario+" (simulated)", res.Report.Settings.DurationS, runs)
	if err != nil {
		return fmt.Errorf("sim: %w", err)
	}
	res.Report.Plots = plots
	if err := writeJSON(filepath.Join(dir, "report.json"), res.Report); err != nil {
		return err
	}
	for i, decs := range res.Decisions {
		name := "decisions.json"
		if i > 0 {
			name = "decisions-off.json"
		}
		if decs == nil {
			decs = []Decision{}
		}
		if err := writeJSON(filepath.Join(dir, name), decs); err != nil {
			return err
		}
	}
	return nil
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("sim: %s: %w", path, err)
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("sim: %w", err)
	}
	return nil
}
