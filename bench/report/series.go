package report

// Summary totals one run.
type Summary struct {
	Ops        int64   `json:"ops"`
	Throughput float64 `json:"throughput"`
	P50Ms      float64 `json:"p50_ms"`
	P99Ms      float64 `json:"p99_ms"`
	Errors     int64   `json:"errors"`
	// ErrorKinds counts the failed operations by kind: the client's error code, or the error's text.
	ErrorKinds map[string]int64 `json:"error_kinds,omitempty"`
}

// Point is one second of one run. HitRatio is the whole cluster's block cache's, null when it saw no
// access that second; CPU the process's CPU time in cores (every in-process node and the clients);
// Steal the share of the machine's CPU time its host took (a virtual machine's steal).
type Point struct {
	T        float64      `json:"t"`
	Ops      int64        `json:"ops"`
	Errors   int64        `json:"errors"`
	P50Ms    float64      `json:"p50_ms"`
	P99Ms    float64      `json:"p99_ms"`
	HitRatio *float64     `json:"hit_ratio"`
	CPU      float64      `json:"cpu_cores"`
	Steal    float64      `json:"steal"`
	Nodes    []NodeSecond `json:"nodes,omitempty"`
}

// EventMark is an event as it fired; EndT is when its action returned.
type EventMark struct {
	T     float64 `json:"t"`
	EndT  float64 `json:"end_t"`
	What  string  `json:"what"`
	Label string  `json:"label"` // the action, for plots and analyses
	Error string  `json:"error,omitempty"`
	Task  bool    `json:"task,omitempty"`
	// Unfinished: the run ended while the event's action still ran.
	Unfinished bool `json:"unfinished,omitempty"`
}

// NodeSecond is one node over one second of a run: the user ranges it led and held at the end of
// it; its block cache's hits and misses, the compactions its engine ran at its end, its emulated
// disk's operations and the time callers waited for its budget (summed over callers); and, in a
// read-hints scenario, the reads it recorded as leader, the hints it applied as follower, the
// bytes it shipped and the hints it dropped. Node is 0 while the node is down.
type NodeSecond struct {
	Node       uint64 `json:"node"`
	Leaders    int    `json:"leaders"`
	Replicas   int    `json:"replicas"`
	Hits       int64  `json:"cache_hits"`
	Misses     int64  `json:"cache_misses"`
	Compacting int64  `json:"compacting,omitempty"`
	DiskOps    int64  `json:"disk_ops,omitempty"`
	DiskBytes  int64  `json:"disk_bytes,omitempty"`
	// DiskReads are the read operations among DiskOps (a block-cache miss, a readahead window).
	DiskReads int64 `json:"disk_reads,omitempty"`
	// CompactedBytes are the bytes the engine's compactions wrote in the second.
	CompactedBytes int64   `json:"compacted_bytes,omitempty"`
	DiskWaitMs     float64 `json:"disk_wait_ms,omitempty"`
	// SnapshotBytes and RangeApplied: the snapshot bytes it sent, and the applied index of its
	// replica of the range the move scenario moves.
	SnapshotBytes uint64 `json:"snapshot_bytes,omitempty"`
	RangeApplied  uint64 `json:"range_applied,omitempty"`
	Recorded      uint64 `json:"recorded,omitempty"`
	Applied       uint64 `json:"applied,omitempty"`
	BytesSent     uint64 `json:"bytes_sent,omitempty"`
	Dropped       uint64 `json:"dropped,omitempty"`
}

// HitRatio is the node's block-cache hit ratio in the second (ok: it saw at least 100 lookups).
func (n NodeSecond) HitRatio() (float64, bool) {
	if n.Hits+n.Misses < 100 {
		return 0, false
	}
	return float64(n.Hits) / float64(n.Hits+n.Misses), true
}

// ClusterHitRatio is the hit ratio of every node's block cache together over a second (Point.HitRatio),
// nil when none was looked up.
func ClusterHitRatio(nodes []NodeSecond) *float64 {
	var h, m int64
	for _, n := range nodes {
		h, m = h+n.Hits, m+n.Misses
	}
	if h+m == 0 {
		return nil
	}
	r := float64(h) / float64(h+m)
	return &r
}
