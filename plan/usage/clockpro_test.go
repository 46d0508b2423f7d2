package usage

// clockPro simulates Pebble's block cache policy (internal/cache/clockpro.go, CLOCK-Pro) for one
// shard of c blocks of one size over a trace, and returns its hit ratio after a warm-up: blocks on
// one clock, hot, cold (resident) or test (evicted, remembered); a miss adds a block as cold, or as
// hot when it is a test page (and the cold target grows); the cold hand promotes a referenced cold
// block to hot and demotes another to test, the hot hand demotes an unreferenced hot block to cold,
// the test hand forgets test pages (and the cold target shrinks).
func clockPro(trace []int, c int) float64 {
	s := newClockShard(c)
	hits, counted := 0, 0
	for i, b := range trace {
		hit := s.get(b)
		if i >= len(trace)/5 {
			counted++
			if hit {
				hits++
			}
		}
	}
	return float64(hits) / float64(counted)
}

const (
	pageHot = iota
	pageCold
	pageTest
)

type clockPage struct {
	block      int
	kind       int
	referenced bool
	prev, next *clockPage
}

type clockShard struct {
	target, coldTarget          int
	pages                       map[int]*clockPage
	handHot, handCold, handTest *clockPage
	hot, cold, test             int
}

func newClockShard(c int) *clockShard {
	return &clockShard{target: c, coldTarget: c, pages: map[int]*clockPage{}}
}

// get reads a block: a hit when it is resident, else it is added.
func (s *clockShard) get(b int) bool {
	p := s.pages[b]
	if p != nil && p.kind != pageTest {
		p.referenced = true
		return true
	}
	if p == nil {
		s.add(&clockPage{block: b, kind: pageCold})
		s.cold++
		return false
	}
	s.test--
	s.remove(p)
	s.coldTarget = min(s.coldTarget+1, s.target)
	*p = clockPage{block: b, kind: pageHot}
	s.add(p)
	s.hot++
	return false
}

func (s *clockShard) add(p *clockPage) {
	for s.target <= s.hot+s.cold && s.handCold != nil {
		s.runCold()
	}
	s.pages[p.block] = p
	p.prev, p.next = p, p
	if s.handHot == nil {
		s.handHot, s.handCold, s.handTest = p, p, p
	} else {
		p.prev, p.next = s.handHot.prev, s.handHot
		p.prev.next, s.handHot.prev = p, p
	}
	if s.handCold == s.handHot {
		s.handCold = s.handCold.prev
	}
}

func (s *clockShard) remove(p *clockPage) {
	delete(s.pages, p.block)
	if p == s.handHot {
		s.handHot = p.prev
	}
	if p == s.handCold {
		s.handCold = p.prev
	}
	if p == s.handTest {
		s.handTest = p.prev
	}
	next := p.next
	p.prev.next, p.next.prev = p.next, p.prev
	p.prev, p.next = p, p
	if next == p {
		s.handHot, s.handCold, s.handTest = nil, nil, nil
	}
}

func (s *clockShard) runCold() {
	p := s.handCold
	if p.kind == pageCold {
		s.cold--
		if p.referenced {
			p.referenced, p.kind = false, pageHot
			s.hot++
		} else {
			p.kind = pageTest
			s.test++
			for s.target < s.test && s.handTest != nil {
				s.runTest()
			}
		}
	}
	s.handCold = s.handCold.next
	for s.target-s.coldTarget <= s.hot && s.handHot != nil {
		s.runHot()
	}
}

func (s *clockShard) runHot() {
	if s.handHot == s.handTest && s.handTest != nil {
		s.runTest()
		if s.handHot == nil {
			return
		}
	}
	p := s.handHot
	if p.kind == pageHot {
		if p.referenced {
			p.referenced = false
		} else {
			p.kind = pageCold
			s.hot--
			s.cold++
		}
	}
	s.handHot = s.handHot.next
}

func (s *clockShard) runTest() {
	if s.cold > 0 && s.handTest == s.handCold && s.handCold != nil {
		s.runCold()
		if s.handTest == nil {
			return
		}
	}
	p := s.handTest
	if p.kind == pageTest {
		s.test--
		s.coldTarget = max(s.coldTarget-1, 0)
		s.remove(p)
	}
	s.handTest = s.handTest.next
}
