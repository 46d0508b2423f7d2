//go:build race

package sim

// raceEnabled shortens the tests that replay whole scenarios: the race detector slows them
// tenfold, and the simulation runs on one goroutine.
const raceEnabled = true
