package prefetch

import (
	"cmp"
	"fmt"
	"math"
	"slices"
)

// eps absorbs rounding when rates are summed and compared with budgets.
const eps = 1e-9

// planning is one round of the chapter's Algorithm 6.1 over the jobs still in the running.
//
// Invariant: bw holds each node's base load (Node.Base) plus the rates of the live transfers, cache
// their held bytes; every live transfer fits its node's budgets in every slot it covers.
type planning struct {
	in     *Instance
	runs   []Run
	items  []Item
	active []bool // by job: still in the running this round

	bw, tentative, cache [][]float64 // node → slot
	transfers            []Transfer
	dead                 []bool // by transfer: released
	prefetchOf           []int  // by item: its Prefetch transfer, or -1
	copyOf               []int  // by item: a Read that keeps a copy of it, or -1
	serves               []Serve
	admitted             []bool // by job
	reason               []string
}

func plan(in *Instance, opt Options) Schedule {
	runs, items := in.Runs(opt)
	rounds := opt.Rounds
	if rounds <= 0 {
		rounds = 3
	}
	active := make([]bool, len(in.Jobs))
	for j := range active {
		active[j] = true
	}
	var p *planning
	for round := 0; round < rounds; round++ {
		p = newPlanning(in, runs, items, active)
		p.choosePrefetches()
		p.admitJobs()
		// Re-plan without the rejected jobs: their prefetches no longer hold bandwidth and cache that
		// the admitted ones could use.
		changed := false
		for j := range active {
			if active[j] && !p.admitted[j] {
				active[j], changed = false, true
			}
		}
		if !changed {
			break
		}
	}
	p.releaseUnused()
	for j := range in.Jobs {
		if !p.admitted[j] {
			p.fitJob(j) // a second chance on what the final plan leaves
		}
	}
	return p.schedule()
}

func newPlanning(in *Instance, runs []Run, items []Item, active []bool) *planning {
	p := &planning{in: in, runs: runs, items: items, active: active,
		prefetchOf: make([]int, len(items)), copyOf: make([]int, len(items)), serves: make([]Serve, len(runs)),
		admitted: make([]bool, len(in.Jobs)), reason: make([]string, len(in.Jobs))}
	grid := func() [][]float64 {
		g := make([][]float64, len(in.Nodes))
		for n := range g {
			g[n] = make([]float64, in.Horizon)
		}
		return g
	}
	p.bw, p.tentative, p.cache = grid(), grid(), grid()
	for n := range p.bw {
		for t := range p.bw[n] {
			p.bw[n][t], p.cache[n][t] = in.base(n, t), in.held(n, t)
		}
	}
	for i := range p.prefetchOf {
		p.prefetchOf[i], p.copyOf[i] = -1, -1
	}
	for r := range p.serves {
		p.serves[r] = Serve{Transfer: -1}
	}
	return p
}

// choosePrefetches is Algorithm 6.2: items by descending r_ℓ/size; each is prefetched at the candidate
// start time with the lowest resulting peak if that beats reading it on demand.
//
// Beyond the chapter, a prefetch may go on past its item's first run start while its runs follow the
// copy as it fills (node/jobs does), as long as each still has its own duration after the copy's
// last byte before its deadline (Evaluate's model of a run reading a copy). It ends at the first run
// when that is as low a peak: the later end is only taken where it lowers the node's peak, as for a
// copy whose earliest start is a few slots before its run (a span read again right after its last
// copy's runs, which the chapter's prefetch, or a read in the run's own slots, must take in half the
// time the run's deadline leaves).
func (p *planning) choosePrefetches() {
	type cand struct {
		item int
		key  float64
	}
	var order []cand
	for i := range p.items {
		// r_ℓ: the most bandwidth the item's runs take at once reading on demand, so simultaneous runs
		// of a shared span add up.
		r := 0.0
		for _, v := range p.readLoad(i) {
			r = max(r, v)
		}
		if r > 0 {
			order = append(order, cand{i, r / p.items[i].Size})
		}
	}
	slices.SortStableFunc(order, func(a, b cand) int { return cmp.Compare(b.key, a.key) })
	for _, c := range order {
		it := p.items[c.item]
		n := it.Node
		reads := p.readLoad(c.item)
		remote := p.score(n, func(t int) float64 { return reads[t] })
		if best, ok := p.bestPrefetch(c.item); ok && (!remote.ok || best.score.less(remote)) {
			p.prefetchOf[c.item] = p.add(best.tr)
			continue
		}
		for t, v := range reads {
			p.tentative[n][t] += v
		}
	}
	p.smooth()
}

// smoothRounds bounds smooth's passes over the nodes.
const smoothRounds = 8

// smooth places the prefetches again one at a time, each beside all the others: the greedy placed
// each beside only those ahead of it in its order, so a copy placed early may sit under a peak that
// later ones built, where a slower or shifted prefetch would lower it. A prefetch is moved only when
// the move lowers its node's peak, or keeps it and flattens the node's profile (less sum of squared
// rates): each move lowers the node's (peak, squares) pair, so the passes end.
func (p *planning) smooth() {
	for round := 0; round < smoothRounds; round++ {
		moved := false
		for i, k := range p.prefetchOf {
			if k < 0 {
				continue
			}
			tr := p.transfers[k]
			p.reserve(tr, -1)
			old := p.score(tr.Node, tr.rateAt)
			if best, ok := p.bestPrefetch(i); ok && best.score.less(old) {
				p.transfers[k] = best.tr
				p.reserve(best.tr, 1)
				moved = true
				continue
			}
			p.reserve(tr, 1)
		}
		if !moved {
			return
		}
	}
}

// placement is a prefetch with its score.
type placement struct {
	tr    Transfer
	score peakScore
}

// bestPrefetch is item i's prefetch with the lowest node peak over the candidate start times and the
// ends from its first run to lastEnd: the earliest end among the lowest peaks,
// then the flattest profile. ok is false if none fits the budgets.
func (p *planning) bestPrefetch(i int) (placement, bool) {
	it := p.items[i]
	var best placement
	for end := it.First; end <= p.lastEnd(i); end++ {
		for _, t := range p.candidates(i) {
			tr := p.prefetch(i, t, end)
			if !p.cacheFits(tr) {
				continue
			}
			s := p.score(it.Node, tr.rateAt)
			if !s.ok {
				continue
			}
			switch {
			case !best.score.ok, s.global < best.score.global*(1-eps)-eps:
				best = placement{tr, s}
			case tr.End == best.tr.End && s.less(best.score):
				best = placement{tr, s}
			}
		}
	}
	return best, best.score.ok
}

// lastEnd is the latest slot item i's prefetch may end at: the earliest of its active runs' deadlines
// less their durations.
func (p *planning) lastEnd(i int) int {
	last := p.in.Horizon
	for _, r := range p.items[i].Runs {
		if run := p.runs[r]; p.active[run.Job] {
			last = min(last, run.Deadline-(run.End-run.Start))
		}
	}
	return max(last, p.items[i].First)
}

// readLoad is the bandwidth item i's active runs take, by slot, reading from disk at their own speed.
func (p *planning) readLoad(i int) map[int]float64 {
	load := map[int]float64{}
	for _, r := range p.items[i].Runs {
		run := p.runs[r]
		if p.active[run.Job] {
			for t := run.Start; t < run.End; t++ {
				load[t] += p.in.rate(run)
			}
		}
	}
	return load
}

// candidates are the start times tried for item i: every slot from the earliest it may start to its
// first run. The chapter tries only the slots where a planned copy on the node is released (where
// cache space frees up), a subset of these, to keep its search small; on a window of tens of slots
// every slot costs little, and a slot between those is often where a prefetch spreads flattest
// beside the others (a prefetch starting right after another one's end, not stacked on it).
func (p *planning) candidates(i int) []int {
	it := p.items[i]
	var ts []int
	for t := it.Earliest; t < min(it.First, p.in.Horizon); t++ {
		ts = append(ts, t)
	}
	if len(ts) == 0 {
		ts = append(ts, it.Earliest)
	}
	return slices.DeleteFunc(ts, func(t int) bool { return t >= it.First })
}

// peakScore ranks a placement: first by the node's peak over the whole window, then by what it adds
// to the sum of the squared rates over the window, i.e. by the flatter profile. (Ranking ties by the
// peak over the placement's own slots preferred reading a span on demand on slots that were quiet so
// far over a slow prefetch under a peak another read set: in the scan-jobs scenario two runs of one
// span then read it on demand on top of each other, at twice the peak.) ok is false when the
// placement exceeds the node's bandwidth budget.
type peakScore struct {
	global, energy float64
	ok             bool
}

func (a peakScore) less(b peakScore) bool {
	if math.Abs(a.global-b.global) > eps*max(1, b.global) {
		return a.global < b.global
	}
	return a.energy < b.energy-eps*max(1, b.energy)
}

// score is node n's peak with add on top of what is planned and tentatively read on demand.
func (p *planning) score(n int, add func(t int) float64) peakScore {
	s := peakScore{ok: true}
	for t := 0; t < p.in.Horizon; t++ {
		base := p.bw[n][t] + p.tentative[n][t]
		a := add(t)
		s.global = max(s.global, base+a)
		if a > 0 {
			s.energy += a * (2*base + a)
			if base+a > p.in.budget(n, t)*(1+eps)+eps {
				s.ok = false
			}
		}
	}
	return s
}

// cacheFits says whether tr's copy fits its node's cache budget beside the planned ones.
func (p *planning) cacheFits(tr Transfer) bool {
	size := p.items[tr.Item].Size
	for t := tr.Start; t < min(tr.Until, p.in.Horizon); t++ {
		if p.cache[tr.Node][t]+tr.Held(size, t) > p.in.Nodes[tr.Node].Cache*(1+eps)+eps {
			return false
		}
	}
	return true
}

func (p *planning) bwFits(n, from, to int, rate float64) bool {
	for t := from; t < to; t++ {
		if p.bw[n][t]+rate > p.in.budget(n, t)*(1+eps)+eps {
			return false
		}
	}
	return true
}

// reserve adds (sign 1) or takes back (sign −1) a transfer's bandwidth and cache.
func (p *planning) reserve(tr Transfer, sign float64) {
	for t := tr.Start; t < tr.End; t++ {
		p.bw[tr.Node][t] += sign * tr.Rate
	}
	for t := tr.Start; t < min(tr.Until, p.in.Horizon); t++ {
		p.cache[tr.Node][t] += sign * tr.Held(p.items[tr.Item].Size, t)
	}
}

func (p *planning) add(tr Transfer) int {
	p.reserve(tr, 1)
	p.transfers = append(p.transfers, tr)
	p.dead = append(p.dead, false)
	return len(p.transfers) - 1
}

// prefetch is item i's prefetch at a constant rate over the slots [at, end), held (pinned) until its
// last run is done.
func (p *planning) prefetch(i, at, end int) Transfer {
	it := p.items[i]
	return Transfer{Kind: Prefetch, Item: i, Span: p.in.Spans[it.Span].ID, Node: it.Node, Run: -1,
		Start: at, End: end, Rate: it.Size / (float64(end-at) * p.in.seconds()), Until: max(it.Last, end)}
}

// admitJobs is Algorithm 6.1's loop: each job in turn is admitted if all its runs fit.
func (p *planning) admitJobs() {
	for j := range p.in.Jobs {
		if p.active[j] {
			p.fitJob(j)
		}
	}
}

// fitJob admits job j if every run of it is served by a planned copy or by a disk read that fits the
// node's bandwidth: at the run's own speed if it can, else the fastest slower rate that still ends by
// the deadline. If one run does not fit, the job's reads are taken back.
func (p *planning) fitJob(j int) {
	mark := len(p.transfers)
	var served []int
	for r, run := range p.runs {
		if run.Job != j {
			continue
		}
		if tr := p.copyFor(r); tr >= 0 {
			p.serves[r] = Serve{Admitted: true, Source: FromCache, Transfer: tr}
			served = append(served, r)
			continue
		}
		tr, ok := p.fitRead(r)
		if !ok {
			for k := len(p.transfers) - 1; k >= mark; k-- {
				p.reserve(p.transfers[k], -1)
				if p.copyOf[p.transfers[k].Item] == k {
					p.copyOf[p.transfers[k].Item] = -1
				}
			}
			p.transfers, p.dead = p.transfers[:mark], p.dead[:mark]
			for _, s := range served {
				p.serves[s] = Serve{Transfer: -1}
			}
			p.admitted[j] = false
			p.reason[j] = fmt.Sprintf("the run at slot %d cannot read %s from node %d's disk by slot %d within its bandwidth budget",
				run.Start, p.in.Spans[run.Span].ID, run.Node, run.Deadline)
			return
		}
		p.serves[r] = Serve{Admitted: true, Source: FromDisk, Transfer: tr}
		served = append(served, r)
	}
	p.admitted[j], p.reason[j] = true, ""
}

// copyFor is the transfer whose copy serves run r: its item's prefetch if it ends early enough for
// the run (one planned for the other jobs' runs may not, for a job given a second chance), or an
// earlier run's read that kept a copy and is done before r starts; -1 if none.
func (p *planning) copyFor(r int) int {
	run := p.runs[r]
	if tr := p.prefetchOf[run.Item]; tr >= 0 && p.transfers[tr].End <= run.Deadline-(run.End-run.Start) {
		return tr
	}
	if tr := p.copyOf[run.Item]; tr >= 0 && p.transfers[tr].End <= run.Start {
		return tr
	}
	return -1
}

// fitRead plans run r's disk read at the constant rate, from the run's own speed down to the slowest
// that ends by its deadline, that fits the node's bandwidth with the lowest peak over the slots it
// spans (the faster on a tie). When a later run of the same item starts after the read is done and the
// cache has room, the read keeps a copy for it: the chapter's remote read "cached for future use".
func (p *planning) fitRead(r int) (int, bool) {
	run := p.runs[r]
	it := p.items[run.Item]
	best, bestPeak := -1, math.Inf(1)
	for end := run.End; end <= run.Deadline; end++ {
		rate := it.Size / (float64(end-run.Start) * p.in.seconds())
		if !p.bwFits(run.Node, run.Start, end, rate) {
			continue
		}
		peak := 0.0
		for t := run.Start; t < end; t++ {
			peak = max(peak, p.bw[run.Node][t]+rate)
		}
		if peak < bestPeak*(1-eps) {
			best, bestPeak = end, peak
		}
	}
	if best < 0 {
		return -1, false
	}
	tr := Transfer{Kind: Read, Item: run.Item, Span: p.in.Spans[run.Span].ID, Node: run.Node, Run: r,
		Start: run.Start, End: best, Rate: it.Size / (float64(best-run.Start) * p.in.seconds())}
	later := false
	for _, o := range it.Runs {
		later = later || p.runs[o].Start >= best
	}
	if kept := tr; later && p.copyOf[run.Item] < 0 {
		if kept.Until = it.Last; p.cacheFits(kept) {
			p.copyOf[run.Item] = p.add(kept)
			return p.copyOf[run.Item], true
		}
	}
	return p.add(tr), true
}

// releaseUnused drops the prefetches no admitted run reads.
func (p *planning) releaseUnused() {
	for i, tr := range p.prefetchOf {
		if tr < 0 {
			continue
		}
		used := false
		for _, r := range p.items[i].Runs {
			used = used || p.admitted[p.runs[r].Job]
		}
		if !used {
			p.reserve(p.transfers[tr], -1)
			p.dead[tr], p.prefetchOf[i] = true, -1
		}
	}
}

func (p *planning) schedule() Schedule {
	s := Schedule{Strategy: Planner, Runs: p.runs, Items: p.items, Serves: p.serves}
	index := make([]int, len(p.transfers))
	for k, tr := range p.transfers {
		index[k] = -1
		if !p.dead[k] {
			index[k] = len(s.Transfers)
			s.Transfers = append(s.Transfers, tr)
		}
	}
	for r := range s.Serves {
		if s.Serves[r].Admitted {
			s.Serves[r].Transfer = index[s.Serves[r].Transfer]
		}
	}
	for j, job := range p.in.Jobs {
		s.Verdicts = append(s.Verdicts, Verdict{Job: job.Name, Admitted: p.admitted[j], Reason: p.reason[j]})
	}
	return s
}
