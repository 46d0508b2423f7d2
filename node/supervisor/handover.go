package supervisor

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shoaldb/shoal/hints"
	"github.com/shoaldb/shoal/node"
	"github.com/shoaldb/shoal/pb"
	"github.com/shoaldb/shoal/replica"
)

// The hand-overs around a restart: where the node's leaderships go while it is away, and when they
// come back.

// WarmWait bounds the wait, around a restart, for a node's cache to be warm for a range it is to lead
// (hints.DefaultTransferWait, what an autopilot transfer waits).
const WarmWait = hints.DefaultTransferWait

// ReturnWarmWait bounds the wait, after a restart, for the node's cache to be warm for the ranges it
// takes back. Their leaders meanwhile are warm voters serving them, so waiting costs little, and a
// leadership taken back cold serves its reads from a disk of a few hundred operations a second:
// with WarmWait (5 s) the hot range came back at half its leader's hit ratio, and its tenant's
// throughput halved for the next tens of seconds.
const ReturnWarmWait = 20 * time.Second

// warmMinReplays is how many measured replays (replays that read a block: found it in the cache or
// not) a range's hit ratio must rest on before it is judged. Fewer, with hints flowing, means the
// range's reads touch no block the cache could lack — served from the memtables, or repeats of keys
// replayed within the second — so there is nothing to warm (TestProfileChangeByRollingRestart's
// targets had applied 535 hints, none of whose replays read a block, and each shed waited 5 s).
const warmMinReplays = 8

// warmShare: a warm cache's replays hit at least this share of the reference hit ratio (the reads
// of the range's current leader, or of the node about to hand it over).
const warmShare = 0.9

// minWarmReadQPS: a range serving fewer reads a second gets too few hints for its warmth to be
// measured, so no hand-over waits for it (a write-only range would wait WarmWait for nothing).
const minWarmReadQPS = 1.0

// waitFunc waits (at most maxWait) until a node's warmth for one range meets crit, and returns the
// warmth it saw and whether crit was met: hints.Client.WaitWarm for a peer, Module.WaitWarm here.
type waitFunc func(crit hints.WarmCriteria, maxWait time.Duration) (hints.Warmth, bool, error)

// flowing is the first test of warmth: the range's live read hints reach the node and are replayed
// promptly. A voter that replays its leader's reads holds what those reads touch.
func flowing() hints.WarmCriteria {
	return hints.WarmCriteria{MaxApplyLag: time.Second, MaxIdle: 2 * time.Second}
}

// judged is the second test, for a range whose replays measured enough block reads to tell: their hit
// ratio is at least warmShare of ref (when ref is known). Nil when there is nothing to judge.
func judged(w hints.Warmth, ref float64, refKnown bool) *hints.WarmCriteria {
	if !refKnown || ref <= 0 || w.Replays < warmMinReplays {
		return nil
	}
	c := flowing()
	c.MinReplays = warmMinReplays
	c = c.RelativeTo(ref, warmShare)
	return &c
}

// waitWarm waits, at most bound in all, until the node's hints for the range are flowing and, when
// its replays measured enough block reads, their hit ratio is at least warmShare of ref. It returns
// the last warmth seen, and the unmet criterion (nil: warm).
func waitWarm(wait waitFunc, ref float64, refKnown bool, bound time.Duration) (hints.Warmth, error) {
	start := time.Now()
	crit := flowing()
	w, ok, err := wait(crit, bound)
	if err != nil {
		return w, err
	}
	if ok {
		c := judged(w, ref, refKnown)
		if c == nil {
			return w, nil
		}
		crit = *c
		if crit.Check(w) == nil {
			return w, nil
		}
		w, ok, err = wait(crit, max(bound-time.Since(start), 0))
		if err != nil {
			return w, err
		}
	}
	if ok {
		return w, nil
	}
	return w, crit.Check(w)
}

// cluster is what the nodes' heartbeats say, as a node's directory holds them.
type cluster struct {
	takers    map[uint64]bool      // live nodes not draining
	load      map[uint64]float64   // node → the requests a second of the ranges it leads
	rangeLoad map[uint64]float64   // range → its leader's requests a second
	reads     map[uint64]float64   // range → its leader's reads a second
	leader    map[uint64]uint64    // range → its leader's node
	addr      map[uint64]string    // node → its gRPC address
	served    map[uint64][2]uint64 // node → the block bytes its reads loaded, and those found in its cache
	// scanned is range → its reads and, of them, scans a second, summed over the replicas that
	// served them: which ranges a block size for scans serves better.
	scanned map[uint64][2]float64
}

// clusterStats reads n's view of the nodes.
func clusterStats(ctx context.Context, n *node.Node) (cluster, error) {
	c := cluster{takers: map[uint64]bool{}, load: map[uint64]float64{}, rangeLoad: map[uint64]float64{},
		reads: map[uint64]float64{}, leader: map[uint64]uint64{}, served: map[uint64][2]uint64{},
		addr: map[uint64]string{}, scanned: map[uint64][2]float64{}}
	resp, err := n.Nodes(ctx, &pb.NodesRequest{})
	if err != nil {
		return c, fmt.Errorf("nodes: %w", err)
	}
	if pe := resp.GetError(); pe != nil {
		return c, fmt.Errorf("nodes: %s", pe.GetMessage())
	}
	for _, ns := range resp.GetNodes() {
		id := ns.GetDesc().GetNodeId()
		if ns.GetLive() && !ns.GetDraining() && !ns.GetDecommissioned() {
			c.takers[id] = true
		}
		c.addr[id] = ns.GetDesc().GetAddr()
		st := ns.GetStats()
		c.served[id] = [2]uint64{st.GetServedBlockBytes(), st.GetServedBlockBytesInCache()}
		for _, rl := range st.GetRanges() {
			sc := c.scanned[rl.GetRangeId()]
			c.scanned[rl.GetRangeId()] = [2]float64{sc[0] + rl.GetReadQps(), sc[1] + rl.GetScanQps()}
			if rl.GetLeader() {
				q := rl.GetReadQps() + rl.GetWriteQps()
				c.load[id] += q
				c.rangeLoad[rl.GetRangeId()], c.reads[rl.GetRangeId()], c.leader[rl.GetRangeId()] = q, rl.GetReadQps(), id
			}
		}
	}
	return c, nil
}

// servedRatio is node's block-cache hit ratio as its own reads saw it since ref (since it started,
// when it restarted in between).
func (c cluster) servedRatio(ref cluster, node uint64) (float64, bool) {
	now, then := c.served[node], ref.served[node]
	if now[0] < then[0] || now[1] < then[1] {
		then = [2]uint64{}
	}
	if now[0] == then[0] {
		return 0, false
	}
	return float64(now[1]-then[1]) / float64(now[0]-then[0]), true
}

// shed hands n's leaderships, all at once, each to the voter of its range that leads the least load
// (the heartbeats' requests a second, plus what shed gave it, busiest range first), among the live
// nodes not draining, once that voter's cache is warm for the range (warmTarget). DrainLeaderships,
// which moves what is left, hands each at once to the first caught-up voter in the range's
// descriptor: a node's ranges could all land on one peer, cold, for the restart. It returns how many
// moved and how many targets were warm.
func (s *Supervisor) shed(ctx context.Context, n *node.Node, c cluster) (moved, warm int) {
	st := n.Store()
	if st == nil || len(c.takers) == 0 {
		return 0, 0
	}
	led := n.LedRanges()
	slices.SortFunc(led, func(a, b uint64) int { return cmp.Compare(c.rangeLoad[b], c.rangeLoad[a]) })
	ratio, known := c.servedRatio(cluster{}, n.NodeID())
	var nMoved, nWarm atomic.Int64
	var wg sync.WaitGroup
	for _, id := range led {
		r := st.Replica(id)
		if r == nil {
			continue
		}
		to := uint64(0)
		for _, rd := range r.Desc().GetReplicas() {
			if rd.Learner || rd.NodeId == n.NodeID() || !c.takers[rd.NodeId] {
				continue
			}
			if to == 0 || c.load[rd.NodeId] < c.load[to] {
				to = rd.NodeId
			}
		}
		if to == 0 {
			continue
		}
		c.load[to] += c.rangeLoad[id]
		wg.Go(func() {
			if c.reads[id] >= minWarmReadQPS && s.warmTarget(ctx, n, c.addr[to], id, ratio, known) {
				nWarm.Add(1)
			}
			resp, err := n.TransferLeader(ctx, &pb.TransferLeaderRequest{RangeId: id, NodeId: to})
			if err == nil && resp.GetError() == nil {
				nMoved.Add(1)
			}
		})
	}
	wg.Wait()
	return int(nMoved.Load()), int(nWarm.Load())
}

// warmTarget waits, at most WarmWait, until the node at addr is warm for rangeID (waitWarm: its
// hints flowing and, when measurable, its replays hitting at least warmShare of n's own hit ratio,
// ratio when known); it reports whether it was.
func (s *Supervisor) warmTarget(ctx context.Context, n *node.Node, addr string, rangeID uint64, ratio float64, known bool) bool {
	if addr == "" || !n.HintsOn() {
		return false
	}
	cc, err := s.peers(n).Conn(addr)
	if err != nil {
		return false
	}
	c := hints.NewClient(cc, n.ClusterID())
	w, err := waitWarm(func(crit hints.WarmCriteria, d time.Duration) (hints.Warmth, bool, error) {
		return c.WaitWarm(ctx, rangeID, crit, d)
	}, ratio, known, WarmWait)
	switch {
	case errors.Is(err, hints.ErrNotWarm):
		s.log.Info("shedding a leadership to a cold voter", "node", n.NodeID(), "range", rangeID, "to", addr, "warmth", w.String(), "unmet", err)
	case err != nil:
		s.log.Warn("warm-up before shedding a leadership", "node", n.NodeID(), "range", rangeID, "to", addr, "err", err)
	}
	return err == nil
}

// warm waits, for all of ranges at once and at most ReturnWarmWait, until n is warm for each (waitWarm):
// the range's live read hints reach n and are replayed (its leader ships them to its followers; an
// awaited range has them replayed in full), and, when the replays measured enough block reads, they
// find their blocks in n's cache at least warmShare as often as the reads the range's leader serves
// find them in its own (the leader's node since ref). The reopen emptied the cache, and a
// compaction for a new block size made stale what the start warmed, so a leadership taken back at
// once would serve its reads from the disk. Ranges serving almost no reads are not waited for, nor
// the meta range (not taken back). It returns how many ranges were warm; without read hints it
// returns at once.
func (s *Supervisor) warm(ctx context.Context, n *node.Node, ranges []uint64, ref cluster) int {
	m := n.Hints()
	if m == nil || !n.HintsOn() {
		return 0
	}
	now, err := clusterStats(ctx, n)
	if err != nil {
		s.log.Warn("warm-up before taking leaderships back: no view of the nodes", "node", n.NodeID(), "err", err)
		return 0
	}
	var warm atomic.Int64
	var wg sync.WaitGroup
	for _, id := range ranges {
		// The range's reads as its leader reports them now, or as this node did before the restart.
		if id == replica.MetaRangeID || max(now.reads[id], ref.reads[id]) < minWarmReadQPS {
			continue
		}
		ratio, known := now.servedRatio(ref, now.leader[id])
		wg.Go(func() {
			w, err := waitWarm(func(crit hints.WarmCriteria, d time.Duration) (hints.Warmth, bool, error) {
				w, err := m.WaitWarm(ctx, id, crit, d)
				if errors.Is(err, hints.ErrNotWarm) {
					return w, false, nil
				}
				return w, err == nil, err
			}, ratio, known, ReturnWarmWait)
			switch {
			case err == nil:
				warm.Add(1)
			case errors.Is(err, hints.ErrNotWarm):
				s.log.Info("taking a leadership back cold", "node", n.NodeID(), "range", id, "warmth", w.String(), "unmet", err)
			default:
				s.log.Warn("warm-up before taking a leadership back", "node", n.NodeID(), "range", id, "err", err)
			}
		})
	}
	wg.Wait()
	return int(warm.Load())
}
