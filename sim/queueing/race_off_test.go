//go:build !race

package queueing

const raceEnabled = false
