//go:build !race

package test

// raceEnabled reports whether the tests run under the race detector, which slows the nodes down
// about tenfold.
const raceEnabled = false
