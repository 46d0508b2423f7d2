//go:build !linux

package history

import "runtime/metrics"

// processCPUSeconds is the CPU time the Go runtime estimates the process has used.
func processCPUSeconds() (float64, bool) {
	s := []metrics.Sample{{Name: "/cpu/classes/total:cpu-seconds"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindFloat64 {
		return 0, false
	}
	return s[0].Value.Float64(), true
}

// residentBytes is the memory the Go runtime has mapped (its closest portable figure to the
// resident set).
func residentBytes() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/total:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}

// volume is unknown outside Linux.
func volume(string) (capacity, available uint64) { return 0, 0 }
