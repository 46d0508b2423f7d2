//go:build !race

package accessstats

const raceEnabled = false
