package hints

import (
	"fmt"
	"testing"
	"time"
)

func keysOf(hs []Hint) []string {
	out := make([]string, len(hs))
	for i, h := range hs {
		out[i] = string(h.Key)
	}
	return out
}

func TestHotKeysKeepsTheHottestWithinBounds(t *testing.T) {
	const perRange = 10
	h := NewHotKeys(HotKeysConfig{PerRange: perRange})
	now := time.Now()
	// 1000 cold keys seen once, 5 hot keys seen 50 times, interleaved over many batches.
	for i := 0; i < 1000; i++ {
		batch := pointHints(fmt.Sprintf("cold%04d", i))
		if i%10 == 0 {
			for j := 0; j < 5; j++ {
				batch = append(batch, Hint{Descriptor: Point([]byte(fmt.Sprintf("hot%d", j))), Count: 5})
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

func TestHotKeysDecay(t *testing.T) {
	h := NewHotKeys(HotKeysConfig{PerRange: 8, HalfLife: time.Second})
	t0 := time.Now()
	h.Observe(1, []Hint{{Descriptor: Point([]byte("old")), Count: 1000}}, t0)
	// 10 half-lives later old weighs ~1; a key seen 5 times now is hotter.
	t1 := t0.Add(10 * time.Second)
	h.Observe(1, []Hint{{Descriptor: Point([]byte("new")), Count: 5}}, t1)
	top := h.Top(1, 2, t1)
	if len(top) != 2 || string(top[0].Key) != "new" || top[0].Count != 5 || top[1].Count != 1 {
		t.Fatalf("top %v %+v", keysOf(top), top)
	}
	// Far beyond the renormalization point, scores stay finite and ordered.
	t2 := t1.Add(500 * time.Second)
	h.Observe(1, []Hint{{Descriptor: Point([]byte("newest")), Count: 2}}, t2)
	h.Observe(1, []Hint{{Descriptor: Point([]byte("newest2")), Count: 3}}, t2)
	top = h.Top(1, 4, t2)
	if string(top[0].Key) != "newest2" || top[0].Count != 3 || string(top[1].Key) != "newest" || top[1].Count != 2 {
		t.Fatalf("after renormalization: %v %+v", keysOf(top), top)
	}
}

func TestHotKeysByteBudget(t *testing.T) {
	h := NewHotKeys(HotKeysConfig{PerRange: 100, MaxBytes: 20000})
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

func TestHotKeysScansAndOwnership(t *testing.T) {
	h := NewHotKeys(HotKeysConfig{})
	key := []byte("s")
	h.Observe(1, []Hint{{Descriptor: ScanOf(key, []byte("t"), 10, true), Count: 2}, {Descriptor: Point(key), Count: 1}}, time.Now())
	key[0] = 'X'
	top := h.Top(1, 0, time.Now())
	if len(top) != 2 || !top[0].Equal(ScanOf([]byte("s"), []byte("t"), 10, true)) || !top[1].Equal(Point([]byte("s"))) {
		t.Fatalf("top %+v", top)
	}
}
