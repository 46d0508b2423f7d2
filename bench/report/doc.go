// Package report owns what every experiment's report.json shares, whether a real cluster or the
// simulator produced it: a run's per-second series and summary, its events, the latency histograms
// they come from, the steady-state checks a series must pass before its figures count, paired on/off
// windows and spreads over repeated runs, a join's score (the incremental-elasticity chapter's
// evaluation), and the figures (PNG timelines with the events marked).
//
// It is a leaf: it imports no package of the store, so that the simulator, which runs nothing below
// the autopilot, writes reports the same tools read. It never runs a workload or a cluster.
package report
