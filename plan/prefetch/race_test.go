//go:build race

package prefetch

// raceEnabled trims the slowest tests: gonum's dense simplex runs an order of magnitude slower under
// the race detector, and the planner has no goroutines for it to check.
const raceEnabled = true
