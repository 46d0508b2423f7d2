package sim

import (
	"math"
	"slices"
	"time"
)

// Host is the machine a loopback cluster runs on as the real runner runs it (bench/scenario: every
// node in one process on one 2-core machine, each on its own emulated disk, storage/emudisk, with a
// block cache of its own and no OS page cache), and the closed loop of client threads that drives it.
// With Threads > 0 the offered load is no longer Scenario.OpsPerSec but what the threads achieve
// against the cluster's stations (closedLoop); zero: the model is off, and the open-loop rate holds.
type Host struct {
	// Threads are the client threads (bench/scenario's closed loop: each issues its next request
	// when the last returns). Think is each request's time outside the modelled stations (the
	// client, gRPC over loopback, the Go scheduler, and on a shared machine the other processes):
	// fitted to each real run's throughput before its first event (Calibrate).
	Threads int
	Think   time.Duration
	// IOPS, ReadBytesPerSec and WriteBytesPerSec are each node's emulated disk (token buckets:
	// reads, writes and syncs share the IOPS); DiskLatency is added to every operation.
	IOPS, ReadBytesPerSec, WriteBytesPerSec float64
	DiskLatency                             time.Duration
	// CacheBytes is each node's block cache, less the memtables Pebble reserves in it; BlockBytes
	// a data block, RecordBytes a record's bytes in one (key, value, encoding).
	CacheBytes, BlockBytes, RecordBytes float64
	// WriteIOs is the disk operations a write costs each replica (raft log append and sync, the
	// apply, their share of flushes and compactions): fitted. A snapshot stream costs its sender a
	// read operation per StreamReadBytes (the readahead window, or a block) and its receiver a
	// write operation per StreamWriteBytes (the sstable it writes, syncs, ingests and compacts
	// again): fitted, between a 4-KiB block per write (at which a 250-IOPS disk could not take the
	// join's 4 MiB/s) and Pebble's 64-KiB buffered writes (at which ingesting costs nothing).
	WriteIOs, StreamReadBytes, StreamWriteBytes float64
	// ScanShare is the part of the cache a scan's blocks, read once, can take from the blocks the
	// workload reads again: Pebble's cache is CLOCK-Pro, whose cold pages (read once) are evicted
	// first, so a snapshot streamed through it evicts at most its cold share: fitted.
	ScanShare float64
	// SharedCores are the cores every node shares (one machine); the CPU is one station of the
	// closed loop at SharedCores·OpsPerCore read-equivalents per second. 0: no CPU station.
	SharedCores float64
}

// on reports whether the host model drives the load.
func (h *Host) on() bool { return h != nil && h.Threads > 0 }

// open reports whether the host is each node's own machine under an open loop at the offered rate:
// no client threads, each node with its own cores (Params.Cores), disk and block cache (openDisks).
func (h *Host) open() bool { return h != nil && h.Threads == 0 && h.IOPS > 0 }

// hostNode is a node's disk and block cache state.
type hostNode struct {
	// polluted is the cache bytes that snapshot streams read through it (Pebble's iterators fill
	// the block cache) and the workload's misses have not pushed out yet.
	polluted float64
	// curve is the cumulative read share of the node's led blocks, hottest first, normalised to
	// 1, over ledBytes; led are the bounds of the ranges it was built over (lo, hi pairs).
	curve    []float64
	shares   []float64 // the led blocks' read shares, hottest first (not normalised)
	led      []int64
	ledBytes float64
	hit      float64 // the last heartbeat's hit ratio
	q        float64 // the share of the led blocks its cache holds (the hottest)
	busy     float64 // the last heartbeat's disk busy share
	// streams are the snapshot bytes the node sends or receives, as intervals.
	streams []stream
}

// stream is a snapshot's bytes over [from, to) at one node, sent or received.
type stream struct {
	from, to time.Time
	bytes    float64
	send     bool
}

// station is a node's demand per client request (seconds of disk) and its misses and writes.
type station struct {
	node         *simNode
	demand       float64
	missPerOp    float64 // disk reads per client request
	writesPerOp  float64 // disk writes per client request (every replica's)
	readsPerOp   float64 // reads of led ranges per client request
	streamedRead float64 // snapshot bytes read through the cache in the last heartbeat
}

// closedLoop is the throughput (requests per second) the client threads achieve now: exact mean
// value analysis (Reiser & Lavenberg, 1980) of a closed network of Threads customers with think
// time Think + disk latencies, one queue per live node's disk and one for the shared CPU. Each
// node's disk demand per request is its read misses (1 − hit ratio of its block cache over the
// ranges it leads) and its writes (WriteIOs per replica) against the IOPS and read bandwidth the
// snapshot streams leave. Why MVA: the real clients are a closed loop, whose throughput is set by
// the bottleneck's demand, not by an offered rate; MVA gives that throughput, and the bound
// 1/D_max it tends to, for any thread count in O(threads × stations). Its exponential service
// overstates queueing at a token-bucket disk (deterministic service) below saturation, not the
// saturated throughput the calibration compares. It then warms the caches over the heartbeat.
func (c *Cluster) closedLoop(now time.Time) float64 {
	h := c.p.Host
	dt := c.p.Heartbeat.Seconds()
	stations := c.diskStations(now, dt)
	demands := make([]float64, 0, len(stations)+1)
	delay := h.Think.Seconds()
	for _, s := range stations {
		demands = append(demands, s.demand)
		delay += (s.missPerOp) * h.DiskLatency.Seconds()
	}
	delay += (1 - c.readFrac) * h.WriteIOs * h.DiskLatency.Seconds() // the leader's log sync
	if h.SharedCores > 0 {
		var work float64
		for _, n := range c.nodes {
			if n.up && !n.gone {
				work += c.unitWork[n.id]
			}
		}
		demands = append(demands, work/(h.SharedCores*c.p.OpsPerCore))
	}
	x := c.pace.offer(now.Sub(c.start), mva(h.Threads, delay, demands))
	c.cache = c.cache[:0]
	for _, s := range stations {
		c.hostOf(s.node).busy = min(1, x*s.demand)
		c.cache = append(c.cache, cacheSecond(s, x*dt))
		c.warm(s, x*dt)
	}
	return x
}

// cacheSecond is what a node's station did over a heartbeat of requests, as a real node's second
// records it (bench/scenario): block-cache lookups of its led ranges' reads split into hits and
// misses, and its disk operations (misses and writes) and reads among them (misses).
func cacheSecond(s station, requests float64) NodeSecond {
	reads, misses := s.readsPerOp*requests, s.missPerOp*requests
	return NodeSecond{Node: s.node.id, Hits: int64(math.Round(reads - misses)), Misses: int64(math.Round(misses)),
		DiskOps: int64(math.Round((s.missPerOp + s.writesPerOp) * requests)), DiskReads: int64(math.Round(misses))}
}

// mva is the throughput of a closed network of n customers with think time z at queues of the
// demands (exact mean value analysis).
func mva(n int, z float64, demands []float64) float64 {
	q := make([]float64, len(demands))
	r := make([]float64, len(demands))
	var x float64
	for k := 1; k <= n; k++ {
		total := z
		for i, d := range demands {
			r[i] = d * (1 + q[i])
			total += r[i]
		}
		if total <= 0 {
			return math.Inf(1)
		}
		x = float64(k) / total
		for i := range demands {
			q[i] = x * r[i]
		}
	}
	return x
}

// diskStations are the live nodes' disks: each one's hit ratio from its cache's warmth, and its
// demand per client request against what the snapshot streams of the last heartbeat left of it.
func (c *Cluster) diskStations(now time.Time, dt float64) []station {
	h := c.p.Host
	rd, wr := c.readFrac, 1-c.readFrac
	out := make([]station, 0, len(c.nodes))
	for _, n := range c.nodes {
		if !n.up || n.gone {
			continue
		}
		hn := c.hostOf(n)
		c.ledCurve(n, hn)
		var reads, writes, cached float64
		for _, r := range n.ordered {
			if r.system {
				continue
			}
			writes += r.share * wr * h.WriteIOs
			if r.leader == n.id {
				reads += r.share * rd
				cached += r.cached
			}
		}
		hn.q = cached / math.Max(hn.ledBytes, 1)
		hn.hit = hitRatio(hn.curve, hn.q)
		sent, recv := hn.streamed(now.Add(-c.p.Heartbeat), now)
		iops := math.Max(h.IOPS-(sent/h.StreamReadBytes+recv/h.StreamWriteBytes)/dt, 0.05*h.IOPS)
		bw := math.Max(h.ReadBytesPerSec-sent/dt, 0.05*h.ReadBytesPerSec)
		miss := reads * (1 - hn.hit)
		d := math.Max((miss+writes)/iops, miss*h.BlockBytes/bw)
		out = append(out, station{node: n, demand: d, missPerOp: miss, writesPerOp: writes, readsPerOp: reads, streamedRead: sent})
	}
	return out
}

// warm moves a node's cache over a heartbeat of requests: the streamed snapshot bytes pollute its
// cold share, the misses push the pollution out (it leaves after that share's worth of inserts) and
// fill it with the led ranges' blocks, each range's part as its misses.
func (c *Cluster) warm(s station, requests float64) {
	h := c.p.Host
	hn := c.hostOf(s.node)
	inserted := s.missPerOp * requests * h.BlockBytes
	scan := h.ScanShare * h.CacheBytes
	hn.polluted = math.Min(scan, hn.polluted*math.Exp(-inserted/math.Max(scan, 1))+s.streamedRead)
	room := h.CacheBytes - hn.polluted
	var cached, misses float64
	led := s.node.ordered[:0:0]
	for _, r := range s.node.ordered {
		if r.system || r.leader != s.node.id {
			continue
		}
		led = append(led, r)
		cached += r.cached
		misses += r.share
	}
	if misses <= 0 {
		return
	}
	grow := math.Min(inserted, math.Max(0, room-cached))
	total := 0.0
	for _, r := range led {
		r.cached = math.Min(r.cached+grow*r.share/misses, c.blockBytesOf(r))
		total += r.cached
	}
	if total > room && total > 0 {
		for _, r := range led {
			r.cached *= room / total
		}
	}
}

// blockBytesOf is the bytes of r's blocks.
func (c *Cluster) blockBytesOf(r *simRange) float64 {
	return float64(r.hi-r.lo) * c.p.Host.RecordBytes
}

// hostOf is n's host state.
func (c *Cluster) hostOf(n *simNode) *hostNode {
	if n.host == nil {
		n.host = &hostNode{}
	}
	return n.host
}

// coldLeaders empties the cache of every range whose leader changed since its cache warmed: a new
// leader (a transfer, an election) starts with none of its blocks, unless read hints are on (the
// default): then the other replicas replay the leader's reads, and the executor's transfer waits
// for the target to be warm (the real join's notes: "n4 warm after 630ms … hit ratio 0.88"), so
// the new leader starts as warm as the old one was.
func (c *Cluster) coldLeaders() {
	c.each(func(r *simRange) {
		if r.cacheAt != r.leader && r.leader != 0 {
			if !c.hints {
				r.cached = 0
			}
			r.cacheAt = r.leader
		}
	})
}

// ledCurve brings n's hit-ratio curve up to date with the ranges it leads: every block's read
// share (the workload's share of its records), hottest first, cumulated and normalised.
func (c *Cluster) ledCurve(n *simNode, hn *hostNode) {
	led := make([]int64, 0, 2*len(hn.led)+2)
	for _, r := range n.ordered {
		if !r.system && r.leader == n.id {
			led = append(led, r.lo, r.hi)
		}
	}
	if hn.curve != nil && slices.Equal(led, hn.led) {
		return // the same ranges led: most steps that land move no leadership
	}
	hn.led = led
	per := max(1, int64(c.p.Host.BlockBytes/c.p.Host.RecordBytes))
	var shares []float64
	hn.ledBytes = 0
	for _, r := range n.ordered {
		if r.system || r.leader != n.id {
			continue
		}
		hn.ledBytes += c.blockBytesOf(r)
		for lo := r.lo; lo < r.hi; lo += per {
			shares = append(shares, c.dist.Share(lo, min(lo+per, r.hi)))
		}
	}
	slices.SortFunc(shares, func(a, b float64) int { return -compareFloat(a, b) })
	hn.shares = shares
	hn.curve = make([]float64, len(shares)+1)
	for i, s := range shares {
		hn.curve[i+1] = hn.curve[i] + s
	}
	if total := hn.curve[len(shares)]; total > 0 {
		for i := range hn.curve {
			hn.curve[i] /= total
		}
	}
}

func compareFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// hitRatio is the read share of the hottest fraction q of the blocks of curve: an ideal cache
// holding that fraction of them.
func hitRatio(curve []float64, q float64) float64 {
	if len(curve) < 2 || q <= 0 {
		return 0
	}
	if q >= 1 {
		return 1
	}
	f := q * float64(len(curve)-1)
	i := int(f)
	return curve[i] + (f-float64(i))*(curve[i+1]-curve[i])
}

// addStream records r's snapshot streamed over [begin, end) from one node to another: its blocks'
// bytes on disk (keys and encoding with the values) read at one and written at the other.
func (c *Cluster) addStream(from, to *simNode, begin, end time.Time, r *simRange) {
	if !c.p.Host.on() {
		return
	}
	b := c.blockBytesOf(r)
	c.hostOf(from).streams = append(c.hostOf(from).streams, stream{from: begin, to: end, bytes: b, send: true})
	c.hostOf(to).streams = append(c.hostOf(to).streams, stream{from: begin, to: end, bytes: b})
}

// streamed is the snapshot bytes n sent and received over [from, to), each stream's bytes spread
// evenly over its interval; streams that ended before from are dropped.
func (hn *hostNode) streamed(from, to time.Time) (sent, recv float64) {
	keep := hn.streams[:0]
	for _, s := range hn.streams {
		if !s.to.After(from) {
			continue
		}
		keep = append(keep, s)
		lo, hi := maxTime(s.from, from), s.to
		if to.Before(hi) {
			hi = to
		}
		if hi.After(lo) {
			part := s.bytes * hi.Sub(lo).Seconds() / math.Max(s.to.Sub(s.from).Seconds(), 1e-9)
			if s.send {
				sent += part
			} else {
				recv += part
			}
		}
	}
	hn.streams = keep
	return sent, recv
}

// pacing paces closed-loop clients as bench/scenario's pacer does: after the warm-up they offer
// share of the throughput served over its second half (or rate, when set), at most what the
// closed loop would serve; from probe (0: never) they run closed-loop again.
type pacing struct {
	share, rate    float64
	warmup, probe  time.Duration
	sum, heartbeat float64 // the warm-up's second half: throughput summed, heartbeats counted
}

// offer is the throughput served at el into the run when the closed loop would serve x.
func (p *pacing) offer(el time.Duration, x float64) float64 {
	switch {
	case p.share <= 0 && p.rate <= 0:
		return x
	case el < p.warmup:
		if el >= p.warmup/2 {
			p.sum, p.heartbeat = p.sum+x, p.heartbeat+1
		}
		return x
	case p.probe > 0 && el >= p.probe:
		return x
	}
	if p.rate <= 0 && p.heartbeat > 0 {
		p.rate = p.share * p.sum / p.heartbeat
	}
	if p.rate <= 0 {
		return x
	}
	return math.Min(x, p.rate)
}
