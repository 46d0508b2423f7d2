//go:build race

package policy

// raceEnabled makes the statistical tests use fewer seeds: the race detector slows them tenfold.
const raceEnabled = true
