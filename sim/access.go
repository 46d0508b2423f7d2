package sim

import (
	"math"
	"slices"
	"sort"
	"time"

	"github.com/shoaldb/shoal/autopilot/model"
	"github.com/shoaldb/shoal/sim/queueing"
	"github.com/shoaldb/shoal/sim/workload"
)

// openDisk is a node's disk over a heartbeat of an open loop (Host.open).
type openDisk struct {
	served    float64 // the share of its requests the disk lets the node serve
	missShare float64 // the share of its client requests that read the disk
	sojourn   float64 // a disk read's mean time: its queue (M/M/1), service and latency, seconds
}

// openDisks is every node's disk under the offered rate total (index: node ID): its demand per
// request (diskStations: misses of the ranges it leads at its cache's hit ratio, every replica's
// writes, against what snapshot streams leave) times the rate is its busy share, held to
// queueing.MaxUtilization: beyond it the node serves only that share of its requests. It then warms
// the caches over the heartbeat with the misses served.
func (c *Cluster) openDisks(now time.Time, total float64) []openDisk {
	h := c.p.Host
	dt := c.p.Heartbeat.Seconds()
	out := make([]openDisk, len(c.nodes)+1)
	for i := range out {
		out[i].served = 1
	}
	for _, s := range c.diskStations(now, dt) {
		d := openDisk{served: 1}
		rho := total * s.demand
		if rho > queueing.MaxUtilization {
			d.served, rho = queueing.MaxUtilization/rho, queueing.MaxUtilization
		}
		if ops := s.missPerOp + s.writesPerOp; ops > 0 && s.demand > 0 {
			d.sojourn = s.demand/ops/(1-rho) + h.DiskLatency.Seconds()
		}
		if reqs := c.unitReqs[s.node.id]; reqs > 0 {
			d.missShare = min(1, s.missPerOp/reqs)
		}
		c.hostOf(s.node).busy = rho
		out[s.node.id] = d
		c.warm(s, total*d.served*dt)
	}
	return out
}

// openParts is a node's latency mixture under an open loop: q requests served at CPU sojourn rate
// rate, of which the disk's misses also wait for the disk (one exponential of the two means
// summed: a hypoexponential's p99 is a little below it).
func openParts(q, rate float64, d openDisk) []queueing.Part {
	if d.missShare <= 0 || d.sojourn <= 0 {
		return []queueing.Part{{Weight: q, Rate: rate}}
	}
	return []queueing.Part{{Weight: q * (1 - d.missShare), Rate: rate},
		{Weight: q * d.missShare, Rate: 1 / (1/rate + d.sojourn)}}
}

// accessShape is r's block-access histogram per unit of its reads: its blocks (Host.BlockBytes of
// Host.RecordBytes records) grouped by their read share in half-octaves (as node/accessstats groups
// its rates), each group's Rate the mean share of r's reads one of its blocks takes. It depends on
// r's records only: computed once, again after a split or merge (initRange).
func (c *Cluster) accessShape(r *simRange) []model.AccessBucket {
	if r.shape != nil {
		return r.shape
	}
	per := max(1, int64(c.p.Host.BlockBytes/c.p.Host.RecordBytes))
	total := c.dist.Share(r.lo, r.hi)
	if total <= 0 {
		r.shape = []model.AccessBucket{}
		return r.shape
	}
	rel := make([]float64, 0, (r.hi-r.lo)/per+1)
	for lo := r.lo; lo < r.hi; lo += per {
		rel = append(rel, c.dist.Share(lo, min(lo+per, r.hi))/total)
	}
	slices.SortFunc(rel, func(a, b float64) int { return -compareFloat(a, b) })
	var out []model.AccessBucket
	key := func(x float64) int { return int(math.Floor(2 * math.Log2(math.Max(x, 1e-300)))) }
	for i := 0; i < len(rel); {
		j, sum := i, 0.0
		for ; j < len(rel) && key(rel[j]) == key(rel[i]); j++ {
			sum += rel[j]
		}
		out = append(out, model.AccessBucket{Rate: sum / float64(j-i), Blocks: float64(j - i)})
		i = j
	}
	r.shape = out
	return out
}

// rangeHit is the share of r's reads its leader's cache serves: the blocks of each of r's groups
// among the hottest Host.q of the leader's blocks (ties shared evenly).
func (c *Cluster) rangeHit(r *simRange, hn *hostNode) float64 {
	n := float64(len(hn.shares))
	if n == 0 {
		return 0
	}
	cached := hn.q * n
	total := c.dist.Share(r.lo, r.hi)
	var hit float64
	for _, b := range c.accessShape(r) {
		s := b.Rate * total
		above := float64(sort.Search(len(hn.shares), func(i int) bool { return hn.shares[i] <= s*(1+1e-9) }))
		upto := float64(sort.Search(len(hn.shares), func(i int) bool { return hn.shares[i] < s*(1-1e-9) }))
		f := 1.0
		if upto > above {
			f = min(1, max(0, (cached-above)/(upto-above)))
		} else if cached < above {
			f = 0
		}
		hit += f * b.Rate * b.Blocks
	}
	return min(1, hit)
}

// reportAccess gives every user range its leader's access statistics, as a node's heartbeat
// carries them (node/accessstats): the last heartbeat's reads, those its leader's cache served, and
// the block-access histogram (exact: the workload's share of each block, times the reads served).
// A range's statistics change only when its reads or its hit ratio moved (LoadEpsilon; 2 points),
// so that snapshots keep sharing it.
func (c *Cluster) reportAccess() {
	dt := c.p.Heartbeat.Seconds()
	for _, n := range c.nodes {
		if !n.up || n.gone || n.host == nil {
			continue
		}
		for _, r := range n.ordered {
			if r.system || r.leader != n.id {
				continue
			}
			hit := c.rangeHit(r, n.host)
			if r.access != nil && !moved(r.accRead, r.read, c.p.LoadEpsilon) && math.Abs(hit-r.accHit) <= 0.02 {
				continue
			}
			r.accRead, r.accHit = r.read, hit
			a := &model.Access{MeasuredReads: uint64(math.Round(r.read * dt))}
			a.MeasuredHits = uint64(math.Round(float64(a.MeasuredReads) * hit))
			for _, b := range c.accessShape(r) {
				a.Hist = append(a.Hist, model.AccessBucket{Rate: b.Rate * r.read, Blocks: b.Blocks})
			}
			r.access = a
			r.changed()
		}
	}
}

// tenantLeaders is, per tenant (workload.Tenants; one tenant otherwise), the most and the fewest of
// its ranges one live node leads, and the busiest disk (Params.Host).
func (c *Cluster) tenantLeaders() (most, fewest []int, busy float64) {
	ends := []int64{c.records}
	if t, ok := c.dist.(workload.Tenants); ok {
		ends = t.Ends
	}
	counts := make([][]int, len(ends))
	for i := range counts {
		counts[i] = make([]int, len(c.nodes)+1)
	}
	for _, r := range c.order {
		if r.leader != 0 {
			counts[sort.Search(len(ends), func(i int) bool { return ends[i] > r.lo })][r.leader]++
		}
	}
	most, fewest = make([]int, len(ends)), make([]int, len(ends))
	for t := range ends {
		fewest[t] = math.MaxInt
		for _, n := range c.nodes {
			if n.up && !n.gone {
				most[t], fewest[t] = max(most[t], counts[t][n.id]), min(fewest[t], counts[t][n.id])
			}
		}
	}
	for _, n := range c.nodes {
		if n.host != nil && n.up && !n.gone {
			busy = max(busy, math.Round(n.host.busy*1000)/1000)
		}
	}
	return most, fewest, busy
}
