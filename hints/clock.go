package hints

import "time"

// epoch anchors the monotonic nanosecond counters kept in atomics (a time.Time does not fit in one).
var epoch = time.Now()

// monoNow is the monotonic time since epoch in nanoseconds, at least 1 (0 means "unset").
func monoNow() int64 {
	if d := int64(time.Since(epoch)); d > 0 {
		return d
	}
	return 1
}

// monoTime turns a monoNow reading back into a time.Time (with a monotonic reading).
func monoTime(n int64) time.Time { return epoch.Add(time.Duration(n)) }
