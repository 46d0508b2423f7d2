package hotkeys

import (
	"cmp"
	"fmt"
	"math/rand"
	"slices"
	"testing"
	"time"

	"github.com/shoaldb/shoal/hints/hint"
)

func pointHints(keys ...string) []hint.Hint {
	out := make([]hint.Hint, len(keys))
	for i, k := range keys {
		out[i] = hint.Hint{Descriptor: hint.Point([]byte(k)), Count: 1}
	}
	return out
}

func manyKeys(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%06d", prefix, i)
	}
	return out
}

func keysOf(hs []hint.Hint) []string {
	out := make([]string, len(hs))
	for i, h := range hs {
		out[i] = string(h.Key)
	}
	return out
}

func TestKeepsTheHottestWithinBounds(t *testing.T) {
	const perRange = 10
	h := New(Config{PerRange: perRange})
	now := time.Now()
	// 1000 cold keys seen once, 5 hot keys seen 50 times, interleaved over many batches.
	for i := 0; i < 1000; i++ {
		batch := pointHints(fmt.Sprintf("cold%04d", i))
		if i%10 == 0 {
			for j := 0; j < 5; j++ {
				batch = append(batch, hint.Hint{Descriptor: hint.Point([]byte(fmt.Sprintf("hot%d", j))), Count: 5})
			}
		}
		h.Observe(1, batch, now)
		if _, entries, _ := h.Size(); entries >= 2*perRange {
			t.Fatalf("%d entries for one range (bound %d)", entries, 2*perRange)
		}
	}
	top := h.Top(1, 5, now)
	got := map[string]uint32{}
	for _, x := range top {
		got[string(x.Key)] = x.Count
	}
	for j := 0; j < 5; j++ {
		if c := got[fmt.Sprintf("hot%d", j)]; c != 500 {
			t.Fatalf("top 5 %v: hot%d count %d, want 500", keysOf(top), j, c)
		}
	}
	if all := h.Top(1, 0, now); len(all) > 2*perRange || len(all) < perRange {
		t.Fatalf("Top(0) returned %d", len(all))
	}
	if h.Top(2, 5, now) != nil {
		t.Fatal("unknown range has hot keys")
	}
}

func TestDecay(t *testing.T) {
	h := New(Config{PerRange: 8, HalfLife: time.Second})
	t0 := time.Now()
	h.Observe(1, []hint.Hint{{Descriptor: hint.Point([]byte("old")), Count: 1000}}, t0)
	// 10 half-lives later old weighs ~1; a key seen 5 times now is hotter.
	t1 := t0.Add(10 * time.Second)
	h.Observe(1, []hint.Hint{{Descriptor: hint.Point([]byte("new")), Count: 5}}, t1)
	top := h.Top(1, 2, t1)
	if len(top) != 2 || string(top[0].Key) != "new" || top[0].Count != 5 || top[1].Count != 1 {
		t.Fatalf("top %v %+v", keysOf(top), top)
	}
	// Far beyond the renormalization point, scores stay finite and ordered.
	t2 := t1.Add(500 * time.Second)
	h.Observe(1, []hint.Hint{{Descriptor: hint.Point([]byte("newest")), Count: 2}}, t2)
	h.Observe(1, []hint.Hint{{Descriptor: hint.Point([]byte("newest2")), Count: 3}}, t2)
	top = h.Top(1, 4, t2)
	if string(top[0].Key) != "newest2" || top[0].Count != 3 || string(top[1].Key) != "newest" || top[1].Count != 2 {
		t.Fatalf("after renormalization: %v %+v", keysOf(top), top)
	}
}

func TestByteBudget(t *testing.T) {
	h := New(Config{PerRange: 100, MaxBytes: 20000})
	now := time.Now()
	for id := uint64(1); id <= 50; id++ {
		h.Observe(id, pointHints(manyKeys(fmt.Sprintf("r%d-", id), 20)...), now.Add(time.Duration(id)*time.Millisecond))
		if _, _, bytes := h.Size(); bytes > 20000 {
			t.Fatalf("%d bytes after range %d (budget 20000)", bytes, id)
		}
	}
	ranges, _, _ := h.Size()
	if ranges >= 50 || h.Top(50, 1, now) == nil || h.Top(1, 1, now) != nil {
		t.Fatalf("%d ranges kept; the least recently updated must go first", ranges)
	}
	// One range alone larger than the budget keeps what fits.
	h.Observe(99, pointHints(manyKeys("big-", 100)...), now.Add(time.Hour))
	if _, _, bytes := h.Size(); bytes > 20000 {
		t.Fatalf("%d bytes with one big range", bytes)
	}
	h.Forget(99)
	if h.Top(99, 1, now) != nil {
		t.Fatal("Forget kept the range")
	}
}

func TestScansAndOwnership(t *testing.T) {
	h := New(Config{})
	key := []byte("s")
	h.Observe(1, []hint.Hint{{Descriptor: hint.ScanOf(key, []byte("t"), 10, true), Count: 2}, {Descriptor: hint.Point(key), Count: 1}}, time.Now())
	key[0] = 'X'
	top := h.Top(1, 0, time.Now())
	if len(top) != 2 || !top[0].Equal(hint.ScanOf([]byte("s"), []byte("t"), 10, true)) || !top[1].Equal(hint.Point([]byte("s"))) {
		t.Fatalf("top %+v", top)
	}
}

// selectHottest leaves the keep highest scores first, whatever the input's order and ties, for
// every boundary; the rest follow.
func TestSelectHottest(t *testing.T) {
	r := rand.New(rand.NewSource(7))
	for _, tc := range []struct {
		name  string
		score func(i int) float64
	}{
		{"distinct", func(i int) float64 { return r.Float64() }},
		{"many ties", func(i int) float64 { return float64(r.Intn(4)) }},
		{"all equal", func(int) float64 { return 1 }},
		{"ascending", func(i int) float64 { return float64(i) }},
		{"descending", func(i int) float64 { return float64(-i) }},
	} {
		for _, n := range []int{1, 2, 3, 17, 512} {
			for keep := 0; keep <= n; keep += max(1, n/7) {
				all := make([]scoredKey, n)
				for i := range all {
					all[i] = scoredKey{k: uint64(i), score: tc.score(i)}
				}
				want := slices.Clone(all)
				slices.SortFunc(want, func(a, b scoredKey) int { return cmp.Compare(b.score, a.score) })
				selectHottest(all, keep)
				kept := make([]float64, 0, keep)
				for _, x := range all[:keep] {
					kept = append(kept, x.score)
				}
				slices.Sort(kept)
				slices.Reverse(kept)
				for i := range kept {
					if kept[i] != want[i].score {
						t.Fatalf("%s n=%d keep=%d: kept scores %v, want the top %d of %v", tc.name, n, keep, kept, keep, want)
					}
				}
				seen := map[uint64]bool{}
				for _, x := range all {
					seen[x.k] = true
				}
				if len(seen) != n {
					t.Fatalf("%s n=%d keep=%d: %d distinct keys after selecting, want %d", tc.name, n, keep, len(seen), n)
				}
			}
		}
	}
}
