package client

import (
	"sync"
	"time"
)

// Load-based routing of reads any replica may serve (ReplicaRead, BoundedStaleness, FollowerRead),
// after Getafix's load-based query routing (Ghosh 2018, §4.4.2, LBR-CC+ML of §4.5.5): the client keeps,
// per node, the requests it has outstanding there and a moving average of their latency, and sends a
// read to the replica (voter or learner) where a new request would finish first — (outstanding + 1) ×
// latency — unless the nearest replica (the lowest latency) is within the imbalance γ of it (eq. 4.2:
// 1 − least/nearest ≤ γ), in which case the nearest keeps the read. The client needs nothing from the
// servers: a slowed or busy node shows up in its own latencies and queue.

// DefaultReadImbalance is γ when Config.ReadImbalance is zero: the thesis's default imbalance cap
// (§4.4.3, §4.5.3: 20 % gave the best latency).
const DefaultReadImbalance = 0.2

const (
	// loadAlpha weighs a new latency sample in a node's moving average.
	loadAlpha = 0.3
	// loadStaleAfter is how long a node's latency stands without a new sample; after it the node is
	// taken to be as fast as the best one, so a node avoided while slow is tried again.
	loadStaleAfter = 2 * time.Second
)

// nodeLoad is what the client has seen of one node.
type nodeLoad struct {
	outstanding int
	latency     float64 // moving average, nanoseconds; 0: no sample yet
	at          time.Time
}

// loadTracker records the client's outstanding replica reads and their latency per node address.
type loadTracker struct {
	mu    sync.Mutex
	nodes map[string]*nodeLoad
}

func newLoadTracker() *loadTracker {
	return &loadTracker{nodes: make(map[string]*nodeLoad)}
}

// begin counts one request to addr as outstanding; the returned function ends it and records its
// latency (a failed attempt's too: a node that times out is a slow node).
func (lt *loadTracker) begin(addr string) func() {
	start := time.Now()
	lt.mu.Lock()
	n := lt.nodes[addr]
	if n == nil {
		n = &nodeLoad{}
		lt.nodes[addr] = n
	}
	n.outstanding++
	lt.mu.Unlock()
	return func() {
		now := time.Now()
		d := float64(now.Sub(start))
		lt.mu.Lock()
		defer lt.mu.Unlock()
		n.outstanding--
		if n.latency == 0 || now.Sub(n.at) > loadStaleAfter {
			n.latency = d
		} else {
			n.latency += loadAlpha * (d - n.latency)
		}
		n.at = now
	}
}

// loads returns what the client knows of each of addrs now: an address without a fresh sample has
// latency 0 (unknown).
func (lt *loadTracker) loads(addrs []string, now time.Time) []replicaLoad {
	out := make([]replicaLoad, len(addrs))
	lt.mu.Lock()
	defer lt.mu.Unlock()
	for i, a := range addrs {
		out[i].addr = a
		if n := lt.nodes[a]; n != nil {
			out[i].outstanding = n.outstanding
			if now.Sub(n.at) <= loadStaleAfter {
				out[i].latency = n.latency
			}
		}
	}
	return out
}

// replicaLoad is one candidate replica as the choice rule sees it.
type replicaLoad struct {
	addr        string
	outstanding int     // the client's requests in flight there
	latency     float64 // recent latency; 0: unknown (taken as the best known)
}

// chooseReplica returns the index in cands (non-empty) of the replica a read goes to. Unknown latencies
// count as the best known one, so new replicas (and ones avoided long enough) are tried. Ties go to
// the first candidate from start on, so a client with no figures yet rotates over the replicas.
//
// The rule: least = the smallest (outstanding + 1) × latency, nearest = the smallest latency; the read
// goes to nearest if 1 − load(least)/load(nearest) ≤ gamma, else to least.
func chooseReplica(cands []replicaLoad, gamma float64, start int) int {
	best := 0.0
	for _, c := range cands {
		if c.latency > 0 && (best == 0 || c.latency < best) {
			best = c.latency
		}
	}
	if best == 0 {
		best = 1
	}
	lat := func(i int) float64 {
		if cands[i].latency > 0 {
			return cands[i].latency
		}
		return best
	}
	load := func(i int) float64 { return float64(cands[i].outstanding+1) * lat(i) }
	n := len(cands)
	start = ((start % n) + n) % n
	nearest, least := start, start
	for k := 1; k < n; k++ {
		i := (start + k) % n
		if lat(i) < lat(nearest) {
			nearest = i
		}
		if load(i) < load(least) {
			least = i
		}
	}
	if 1-load(least)/load(nearest) <= gamma {
		return nearest
	}
	return least
}
