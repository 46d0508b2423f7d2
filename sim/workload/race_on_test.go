//go:build race

package workload

// raceEnabled makes the statistical tests draw fewer samples: the race detector slows them tenfold,
// and it checks memory accesses, not statistics.
const raceEnabled = true
