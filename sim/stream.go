package sim

import (
	"math"
	"time"
)

// A stream job in the simulator (Scenario.Stream): every request of the workload is an event of a
// job whose task keeps its key's state in the store, and the state access it makes is local when
// the node running the task leads the key's range. The three placements of docs/design/streams.md
// are counted side by side over the same events, so one run compares them under the same moves:
//   - aligned: the task runs at the range's leader. Its producer sends to the leader it knows; after
//     a leadership change the first events are answered RETRY and sent again to the new leader
//     (Params.StreamReroute, the real hand-off's time), so every state access is local and the
//     hand-off shows as events re-routed;
//   - placed: the tasks are placed aligned once, at the leader of the range when the job first saw
//     it, and never moved: remote once the autopilot moved that leadership;
//   - unaligned: a hash of the key over the nodes live when the job started (the stream processor's
//     own partitioner, which the real producer also lists once): local for about 1/N of the keys,
//     and never for a node that joined later.
// Remote state accesses are counted, not charged: the simulated nodes' load is the store's
// requests only (a limit docs/design/simulator.md states).

// StreamReport is a run's stream job: its events after the warm-up and, per placement, the share
// of their state accesses served by the node running the task.
type StreamReport struct {
	Events int64 `json:"events"`
	// Waiting is the events offered to a range without a leader (sent again once it has one; not
	// counted in the shares).
	Waiting  int64   `json:"waiting"`
	Rerouted int64   `json:"aligned_rerouted"` // aligned events answered RETRY after a leadership change
	Aligned  float64 `json:"aligned_local"`
	Placed   float64 `json:"placed_local"`
	// Unaligned is the hash's share; ListedNodes the nodes it hashes over.
	Unaligned   float64 `json:"unaligned_local"`
	ListedNodes int     `json:"listed_nodes"`
	// Windows are the same shares per StreamWindow of the run (the first starts at the warm-up's end).
	Windows []StreamWindow `json:"windows"`
}

// StreamWindow is the stream job's shares over [From, To) seconds of the run.
type StreamWindow struct {
	From, To  float64
	Events    int64   `json:"events"`
	Aligned   float64 `json:"aligned_local"`
	Placed    float64 `json:"placed_local"`
	Unaligned float64 `json:"unaligned_local"`
}

// streamReroute is an aligned producer's hand-off after a leadership change: the real producer's
// first events reached the new leader's task within 29 ms of a transfer's start
// (TestStreamFollowsANewNode, docs/design/streams.md).
const streamReroute = 30 * time.Millisecond

// streamWindow is the length of a StreamReport window.
const streamWindow = 10

// streamJob is the bookkeeping of a run's stream job.
type streamJob struct {
	listed  []uint64          // the unaligned hash's nodes
	route   map[uint64]uint64 // range → the leader its aligned producer sends to
	placed  map[uint64]uint64 // range → the node its placed tasks run on
	hashed  map[uint64]hashShare
	reroute float64 // seconds
	// Event sums, whole run and current window.
	total, win streamSums
	winFrom    float64
	rep        StreamReport
}

type streamSums struct{ events, waiting, rerouted, aligned, placed, unaligned float64 }

// hashShare caches the share of a range's requests whose key hashes to its leader.
type hashShare struct {
	lo, hi int64
	leader uint64
	share  float64
}

func newStreamJob(c *Cluster, reroute float64, from float64) *streamJob {
	j := &streamJob{route: map[uint64]uint64{}, placed: map[uint64]uint64{}, hashed: map[uint64]hashShare{},
		reroute: reroute, winFrom: from}
	for _, n := range c.nodes {
		if c.live(n) {
			j.listed = append(j.listed, n.id)
		}
	}
	return j
}

// count adds one heartbeat of dt seconds at the offered rate total, if counting (after the warm-up).
func (j *streamJob) count(c *Cluster, total, dt float64, counting bool) {
	var s streamSums
	for _, r := range c.order {
		if r.system || r.share == 0 {
			continue
		}
		ev := total * r.share * dt
		if r.leader == 0 {
			s.waiting += ev
			continue
		}
		if _, ok := j.placed[r.id]; !ok {
			j.placed[r.id] = r.leader
		}
		if to, ok := j.route[r.id]; ok && to != r.leader {
			s.rerouted += ev * min(1, j.reroute/dt)
		}
		j.route[r.id] = r.leader
		s.events += ev
		s.aligned += ev // re-routed events too end at the leader's task
		if j.placed[r.id] == r.leader {
			s.placed += ev
		}
		s.unaligned += ev * j.hashLocal(c, r)
	}
	if counting {
		j.total.add(s)
		j.win.add(s)
	}
}

func (s *streamSums) add(o streamSums) {
	s.events += o.events
	s.waiting += o.waiting
	s.rerouted += o.rerouted
	s.aligned += o.aligned
	s.placed += o.placed
	s.unaligned += o.unaligned
}

// closeWindow ends the window at t seconds.
func (j *streamJob) closeWindow(t float64) {
	w := StreamWindow{From: j.winFrom, To: t, Events: int64(math.Round(j.win.events))}
	w.Aligned, w.Placed, w.Unaligned = j.win.shares()
	j.rep.Windows = append(j.rep.Windows, w)
	j.win, j.winFrom = streamSums{}, t
}

func (s streamSums) shares() (aligned, placed, unaligned float64) {
	if s.events == 0 {
		return 0, 0, 0
	}
	r := func(x float64) float64 { return math.Round(x/s.events*1e4) / 1e4 }
	return r(s.aligned), r(s.placed), r(s.unaligned)
}

func (j *streamJob) report() *StreamReport {
	rep := j.rep
	rep.Events = int64(math.Round(j.total.events))
	rep.Waiting = int64(math.Round(j.total.waiting))
	rep.Rerouted = int64(math.Round(j.total.rerouted))
	rep.Aligned, rep.Placed, rep.Unaligned = j.total.shares()
	rep.ListedNodes = len(j.listed)
	if rep.Windows == nil {
		rep.Windows = []StreamWindow{}
	}
	return &rep
}

// hashSample is how many of a range's records the hash share weighs at most (evenly spaced).
const hashSample = 4096

// hashLocal is the share of r's requests whose key the unaligned hash sends to r's leader: each
// record weighted by the workload's share of it.
func (j *streamJob) hashLocal(c *Cluster, r *simRange) float64 {
	if h, ok := j.hashed[r.id]; ok && h.lo == r.lo && h.hi == r.hi && h.leader == r.leader {
		return h.share
	}
	step := max(1, (r.hi-r.lo)/hashSample)
	var local, all float64
	for i := r.lo; i < r.hi; i += step {
		w := c.dist.Share(i, i+1)
		all += w
		if j.listed[splitmix(uint64(i))%uint64(len(j.listed))] == r.leader {
			local += w
		}
	}
	share := 0.0
	if all > 0 {
		share = local / all
	}
	j.hashed[r.id] = hashShare{lo: r.lo, hi: r.hi, leader: r.leader, share: share}
	return share
}

// splitmix is SplitMix64's finalizer: a record's hash, fixed for every run.
func splitmix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}
