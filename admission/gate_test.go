package admission

import (
	"sync"
	"testing"
)

func TestGateLimits(t *testing.T) {
	type step struct {
		acquire int64 // size to acquire; -1 to release the oldest admitted
		admit   bool
	}
	tests := []struct {
		name   string
		limits Limits
		steps  []step
	}{
		{"unlimited", Limits{}, []step{{1 << 40, true}, {1 << 40, true}, {1, true}}},
		{"count", Limits{Count: 2}, []step{{1, true}, {1, true}, {1, false}, {-1, true}, {1, true}, {1, false}}},
		{"bytes", Limits{Bytes: 100}, []step{{60, true}, {40, true}, {1, false}, {-1, true}, {61, false}, {60, true}}},
		// Alone, a piece bigger than the byte limit is admitted; with anything else in flight it is not.
		{"oversized alone", Limits{Bytes: 100}, []step{{500, true}, {1, false}, {-1, true}, {1, true}, {500, false}}},
		{"both", Limits{Count: 3, Bytes: 10}, []step{{5, true}, {5, true}, {0, true}, {0, false}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewGate("requests", tt.limits)
			var held []int64
			var admitted, refused uint64
			for i, s := range tt.steps {
				if s.acquire < 0 {
					g.Release(held[0])
					held = held[1:]
					continue
				}
				r := g.TryAcquire(s.acquire)
				if got := r == nil; got != s.admit {
					t.Fatalf("step %d: acquire %d admitted=%v, want %v (%+v)", i, s.acquire, got, s.admit, g.Stats())
				}
				if r == nil {
					held = append(held, s.acquire)
					admitted++
				} else {
					refused++
					if r.Gate != "requests" || r.Limits != tt.limits || r.RequestedSize != s.acquire {
						t.Errorf("step %d: refusal %+v does not describe the gate", i, r)
					}
				}
			}
			st := g.Stats()
			var bytes int64
			for _, h := range held {
				bytes += h
			}
			if st.InFlight != int64(len(held)) || st.Bytes != bytes || st.Admitted != admitted || st.Refused != refused {
				t.Errorf("stats %+v, want in flight %d bytes %d admitted %d refused %d", st, len(held), bytes, admitted, refused)
			}
		})
	}
}

func TestGrowIsCountedAndReleased(t *testing.T) {
	g := NewGate("requests", Limits{Bytes: 100})
	if r := g.TryAcquire(10); r != nil {
		t.Fatal(r)
	}
	g.Grow(200) // never refused: the work is done
	if st := g.Stats(); st.Bytes != 210 || st.PeakByte != 210 {
		t.Errorf("after grow: %+v", st)
	}
	if r := g.TryAcquire(1); r == nil {
		t.Errorf("admitted while grown work holds the bytes")
	}
	g.Release(210)
	if st := g.Stats(); st.Bytes != 0 || st.InFlight != 0 {
		t.Errorf("after release: %+v", st)
	}
}

// Many goroutines acquiring and releasing never see more admitted than the limits allow.
func TestGateBoundUnderConcurrency(t *testing.T) {
	g := NewGate("proposals", Limits{Count: 8, Bytes: 800})
	var mu sync.Mutex
	var inFlight, maxSeen int64
	var wg sync.WaitGroup
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 2000; i++ {
				if g.TryAcquire(50) != nil {
					continue
				}
				mu.Lock()
				inFlight++
				maxSeen = max(maxSeen, inFlight)
				mu.Unlock()
				mu.Lock()
				inFlight--
				mu.Unlock()
				g.Release(50)
			}
		}()
	}
	wg.Wait()
	st := g.Stats()
	if maxSeen > 8 || st.PeakCount > 8 || st.PeakByte > 800 {
		t.Errorf("bound exceeded: max in flight %d, stats %+v", maxSeen, st)
	}
	if st.InFlight != 0 || st.Bytes != 0 {
		t.Errorf("not everything released: %+v", st)
	}
	if st.Admitted == 0 {
		t.Errorf("nothing admitted")
	}
}
