package prefetch

import "slices"

// demandReads is the chapter's RemoteRead: no plan, every run reads its span from disk at its own speed
// from its start. Nothing is turned away, so every verdict is an admission.
func demandReads(in *Instance, opt Options) Schedule {
	runs, items := in.Runs(opt)
	s := Schedule{Strategy: DemandReads, Runs: runs, Items: items, Serves: make([]Serve, len(runs))}
	for r := range runs {
		s.Serves[r] = Serve{Admitted: true, Source: FromDisk, Transfer: len(s.Transfers)}
		s.Transfers = append(s.Transfers, diskRead(in, runs, r))
	}
	s.Verdicts = admitAll(in)
	return s
}

func diskRead(in *Instance, runs []Run, r int) Transfer {
	run := runs[r]
	return Transfer{Kind: Read, Item: run.Item, Span: in.Spans[run.Span].ID, Node: run.Node, Run: r,
		Start: run.Start, End: run.End, Rate: in.rate(run)}
}

func admitAll(in *Instance) []Verdict {
	v := make([]Verdict, len(in.Jobs))
	for j, job := range in.Jobs {
		v[j] = Verdict{Job: job.Name, Admitted: true}
	}
	return v
}

// cached is a copy DemandPaging holds.
type cached struct {
	item     int
	size     float64
	ready    int // the slot its filling read is done
	busy     int // the slot the last run reading it is done
	hits     int
	transfer int // the Read that fills it
}

// demandPaging is the chapter's DemandPaging: a run whose span has a complete copy in its node's cache
// reads the copy; any other run reads from disk at its own speed, and the first such read of an item
// keeps a copy (runs that start while it is still filling read from disk too, as the chapter notes).
// When the cache is full, copies no run is reading are evicted by PACMan's LIFE: the largest first — an
// input's wave-width grows with its size, and LIFE gives up the widest inputs to keep the most runs
// fully cached — then the least read.
func demandPaging(in *Instance, opt Options) Schedule {
	runs, items := in.Runs(opt)
	s := Schedule{Strategy: DemandPaging, Runs: runs, Items: items, Serves: make([]Serve, len(runs))}
	caches := make([][]*cached, len(in.Nodes))
	for r, run := range runs {
		n, at := run.Node, run.Start
		// A copy no run of its item will read again is released (the next runs need newer data).
		caches[n] = slices.DeleteFunc(caches[n], func(c *cached) bool { return items[c.item].Last <= at })
		i := slices.IndexFunc(caches[n], func(c *cached) bool { return c.item == run.Item })
		if i >= 0 && caches[n][i].ready <= at {
			c := caches[n][i]
			c.busy, c.hits = max(c.busy, run.End), c.hits+1
			s.Serves[r] = Serve{Admitted: true, Source: FromCache, Transfer: c.transfer}
			continue
		}
		tr := diskRead(in, runs, r)
		s.Serves[r] = Serve{Admitted: true, Source: FromDisk, Transfer: len(s.Transfers)}
		if i < 0 && makeRoom(in, &s, caches, n, at, items[run.Item].Size) {
			tr.Until = items[run.Item].Last
			caches[n] = append(caches[n], &cached{item: run.Item, size: items[run.Item].Size, ready: run.End,
				busy: run.End, transfer: len(s.Transfers)})
		}
		s.Transfers = append(s.Transfers, tr)
	}
	s.Verdicts = admitAll(in)
	return s
}

// makeRoom evicts idle copies from node n's cache by LIFE until size more bytes fit, and says whether
// they do; it evicts nothing when even every idle copy would not make room.
func makeRoom(in *Instance, s *Schedule, caches [][]*cached, n, at int, size float64) bool {
	used, idle := 0.0, 0.0
	for _, c := range caches[n] {
		used += c.size
		if c.busy <= at {
			idle += c.size
		}
	}
	budget := (in.Nodes[n].Cache - in.held(n, at)) * (1 + eps)
	if used+size <= budget {
		return true
	}
	if used-idle+size > budget {
		return false
	}
	victims := slices.Clone(caches[n])
	slices.SortStableFunc(victims, func(a, b *cached) int {
		switch {
		case a.size != b.size:
			if a.size > b.size {
				return -1
			}
			return 1
		default:
			return a.hits - b.hits
		}
	})
	for _, v := range victims {
		if used+size <= budget {
			break
		}
		if v.busy > at {
			continue
		}
		used -= v.size
		s.Transfers[v.transfer].Until = at
		caches[n] = slices.DeleteFunc(caches[n], func(c *cached) bool { return c == v })
	}
	return true
}
