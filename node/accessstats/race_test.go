//go:build race

package accessstats

// raceEnabled trims the accuracy test against Pebble's cache to the busy node's key budget: the race
// detector makes its quarter-million engine reads several times slower, and the tracker's locking
// is checked by the other tests.
const raceEnabled = true
