package hints

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shoaldb/shoal/hints/hint"
)

type rec struct {
	rangeID       uint64
	key, end      string
	limit         int
	scan, reverse bool
}

func (r rec) do(b *Buffer) bool {
	if r.scan {
		return b.RecordScan(r.rangeID, []byte(r.key), []byte(r.end), r.limit, r.reverse)
	}
	return b.Record(r.rangeID, []byte(r.key))
}

// render prints drained hints as "r<id> <descriptor> x<count>" lines, in order.
func render(rs []hint.RangeHints) []string {
	var out []string
	for _, r := range rs {
		for _, h := range r.Hints {
			out = append(out, fmt.Sprintf("r%d %v x%d", r.RangeID, h.Descriptor, h.Count))
		}
	}
	return out
}

func TestBufferSummarizes(t *testing.T) {
	for _, tc := range []struct {
		name       string
		recs       []rec
		want       []string
		summarized uint64
	}{
		{
			name: "duplicates of a point read become one hint with a count",
			recs: []rec{{rangeID: 7, key: "a"}, {rangeID: 7, key: "b"}, {rangeID: 7, key: "a"}, {rangeID: 7, key: "a"}},
			want: []string{`r7 get "a" x3`, `r7 get "b" x1`}, summarized: 2,
		},
		{
			name: "ranges are grouped in ascending order, first occurrence order within a range",
			recs: []rec{{rangeID: 9, key: "z"}, {rangeID: 2, key: "y"}, {rangeID: 9, key: "a"}, {rangeID: 2, key: "y"}},
			want: []string{`r2 get "y" x2`, `r9 get "z" x1`, `r9 get "a" x1`}, summarized: 1,
		},
		{
			name: "the same key in two ranges stays two hints",
			recs: []rec{{rangeID: 1, key: "k"}, {rangeID: 2, key: "k"}},
			want: []string{`r1 get "k" x1`, `r2 get "k" x1`},
		},
		{
			name: "scans are summarized on start, end, limit and direction",
			recs: []rec{
				{rangeID: 3, key: "a", end: "m", limit: 10, scan: true},
				{rangeID: 3, key: "a", end: "m", limit: 10, scan: true},
				{rangeID: 3, key: "a", end: "m", limit: 20, scan: true},
				{rangeID: 3, key: "a", end: "m", limit: 10, scan: true, reverse: true},
				{rangeID: 3, key: "a", end: "n", limit: 10, scan: true},
				{rangeID: 3, key: "a"}, // a point read of the scan's start is another read
			},
			want: []string{
				`r3 scan ["a", "m") limit 10 x2`, `r3 scan ["a", "m") limit 20 x1`, `r3 rscan ["a", "m") limit 10 x1`,
				`r3 scan ["a", "n") limit 10 x1`, `r3 get "a" x1`,
			},
			summarized: 1,
		},
		{
			name: "key and end boundaries are not confused (ab|c vs a|bc)",
			recs: []rec{{rangeID: 1, key: "ab", end: "c", scan: true}, {rangeID: 1, key: "a", end: "bc", scan: true}},
			want: []string{`r1 scan ["ab", "c") limit 0 x1`, `r1 scan ["a", "bc") limit 0 x1`},
		},
		{
			name: "empty and open-ended scans",
			recs: []rec{{rangeID: 1, key: "", end: "", limit: 5, scan: true}, {rangeID: 1, key: "", end: "", limit: 5, scan: true}},
			want: []string{`r1 scan ["", "") limit 5 x2`}, summarized: 1,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := NewBuffer(BufferConfig{FlushEntries: 16})
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range tc.recs {
				if !r.do(b) {
					t.Fatalf("record %+v dropped", r)
				}
			}
			got := render(b.Drain())
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Fatalf("drained\n%q\nwant\n%q", got, tc.want)
			}
			m := b.Metrics()
			if m.Recorded != uint64(len(tc.recs)) || m.Summarized != tc.summarized {
				t.Fatalf("recorded %d summarized %d, want %d and %d", m.Recorded, m.Summarized, len(tc.recs), tc.summarized)
			}
			if again := b.Drain(); len(again) != 0 {
				t.Fatalf("second drain returned %v", render(again))
			}
		})
	}
}

func TestBufferDrainedHintsOwnTheirMemory(t *testing.T) {
	b, _ := NewBuffer(BufferConfig{FlushEntries: 4})
	key := []byte("alpha")
	b.Record(1, key)
	copy(key, "XXXXX") // the caller reuses its key buffer at once
	first := b.Drain()
	// Both segments are reused twice over with other keys of the same length.
	for i := 0; i < 2; i++ {
		b.Record(1, []byte("bravo"))
		b.Record(1, []byte("delta"))
		b.Drain()
	}
	if got := string(first[0].Hints[0].Key); got != "alpha" {
		t.Fatalf("drained key changed to %q", got)
	}
}

func TestBufferBoundsAndDrops(t *testing.T) {
	for _, tc := range []struct {
		name     string
		cfg      BufferConfig
		keys     []string
		accepted int
		reason   DropReason
	}{
		{name: "slots", cfg: BufferConfig{FlushEntries: 4, Capacity: 6, KeyBytes: 1024},
			keys: []string{"a", "b", "c", "d", "e", "f", "g", "h", "i"}, accepted: 6, reason: DropBufferFull},
		{name: "key arena", cfg: BufferConfig{FlushEntries: 4, Capacity: 100, KeyBytes: 10},
			keys: []string{"aaaa", "bbbb", "cccc", "dd"}, accepted: 2, reason: DropBufferFull},
		{name: "key too large", cfg: BufferConfig{FlushEntries: 4, MaxKeyBytes: 3},
			keys: []string{"abc", "abcd", "x"}, accepted: 2, reason: DropTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := NewBuffer(tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			accepted := 0
			for _, k := range tc.keys {
				if b.Record(1, []byte(k)) {
					accepted++
				}
			}
			m := b.Metrics()
			if accepted != tc.accepted || m.Dropped[tc.reason] != uint64(len(tc.keys)-tc.accepted) {
				t.Fatalf("accepted %d dropped %v, want %d accepted and %d %v", accepted, m.Dropped, tc.accepted,
					len(tc.keys)-tc.accepted, tc.reason)
			}
			rs := b.Drain()
			if len(rs) != 1 || int(rs[0].Reads()) != tc.accepted {
				t.Fatalf("drained %v, want the %d accepted reads", render(rs), tc.accepted)
			}
			// The drained segment is reset: after two swaps it accepts as much again.
			b.Drain()
			again := 0
			for _, k := range tc.keys {
				if b.Record(1, []byte(k)) {
					again++
				}
			}
			if again != tc.accepted {
				t.Fatalf("after drains accepted %d, want %d", again, tc.accepted)
			}
		})
	}
}

func TestBufferConfigValidate(t *testing.T) {
	if _, err := NewBuffer(BufferConfig{FlushEntries: 10, Capacity: 5}); err == nil {
		t.Fatal("FlushEntries above Capacity accepted")
	}
	b, err := NewBuffer(BufferConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if c := b.Config(); c.FlushEntries != 10000 || c.Capacity != 20000 || c.KeyBytes != 48*20000 || c.MaxKeyBytes != 1024 {
		t.Fatalf("defaults %+v", c)
	}
}

func TestBufferFullSignal(t *testing.T) {
	b, _ := NewBuffer(BufferConfig{FlushEntries: 3, Capacity: 10})
	for i := 0; i < 2; i++ {
		b.Record(1, []byte{byte(i)})
	}
	select {
	case <-b.Full():
		t.Fatal("signalled before FlushEntries")
	default:
	}
	for i := 2; i < 10; i++ {
		b.Record(1, []byte{byte(i)})
	}
	select {
	case <-b.Full():
	default:
		t.Fatal("not signalled at FlushEntries")
	}
	select {
	case <-b.Full():
		t.Fatal("signalled twice in one window")
	default:
	}
	b.Drain()
	for i := 0; i < 3; i++ {
		b.Record(1, []byte{byte(i)})
	}
	select {
	case <-b.Full():
	default:
		t.Fatal("not signalled in the next window")
	}
}

// Writers record unique keys while a drainer swaps continuously: every accepted read comes out of
// exactly one drain, every refused one is counted as dropped, and nothing else appears.
func TestBufferSwapUnderConcurrentWriters(t *testing.T) {
	const writers, perWriter = 8, 20000
	b, _ := NewBuffer(BufferConfig{FlushEntries: 2048, Capacity: 4096})
	var accepted [writers][]bool
	var done atomic.Bool
	drained := map[string]int{}
	var drains int
	drainerDone := make(chan struct{})
	collect := func(rs []hint.RangeHints) {
		for _, r := range rs {
			for _, h := range r.Hints {
				if r.RangeID != uint64(h.Key[0]) {
					t.Errorf("hint %q in range %d", h.Key, r.RangeID)
				}
				drained[string(h.Key)] += int(h.Count)
			}
		}
	}
	go func() {
		defer close(drainerDone)
		for !done.Load() {
			collect(b.Drain())
			drains++
			runtime.Gosched()
		}
	}()
	var wg sync.WaitGroup
	for w := 0; w < writers; w++ {
		accepted[w] = make([]bool, perWriter)
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < perWriter; i++ {
				key := []byte(fmt.Sprintf("%c/w%d/%06d", byte(w+1), w, i))
				accepted[w][i] = b.Record(uint64(w+1), key)
				if i%256 == 0 {
					runtime.Gosched()
				}
			}
		}(w)
	}
	wg.Wait()
	done.Store(true)
	<-drainerDone
	collect(b.Drain())
	collect(b.Drain()) // both segments
	var ok int
	for w := 0; w < writers; w++ {
		for i := 0; i < perWriter; i++ {
			key := fmt.Sprintf("%c/w%d/%06d", byte(w+1), w, i)
			n := drained[key]
			switch {
			case accepted[w][i] && n != 1:
				t.Fatalf("accepted %q drained %d times", key, n)
			case !accepted[w][i] && n != 0:
				t.Fatalf("refused %q drained %d times", key, n)
			}
			delete(drained, key)
			if accepted[w][i] {
				ok++
			}
		}
	}
	if len(drained) != 0 {
		t.Fatalf("drains returned %d keys nobody recorded", len(drained))
	}
	m := b.Metrics()
	if m.Recorded != uint64(ok) || m.Recorded+m.Dropped[DropBufferFull] != writers*perWriter {
		t.Fatalf("recorded %d + dropped %d != %d (accepted %d)", m.Recorded, m.Dropped[DropBufferFull], writers*perWriter, ok)
	}
	t.Logf("%d drains, %d of %d accepted, %d dropped (buffer full)", drains, ok, writers*perWriter, m.Dropped[DropBufferFull])
}

// Record on the read path does not allocate.
func TestBufferRecordDoesNotAllocate(t *testing.T) {
	b, _ := NewBuffer(BufferConfig{FlushEntries: 1 << 16})
	key, end := []byte("user000000001234"), []byte("user000000009999")
	allocs := testing.AllocsPerRun(1000, func() {
		b.Record(3, key)
		b.RecordScan(3, key, end, 100, false)
	})
	if allocs != 0 {
		t.Fatalf("Record allocates %v times per call", allocs)
	}
}

func BenchmarkBufferRecord(b *testing.B) {
	buf, _ := NewBuffer(BufferConfig{})
	stop := make(chan struct{})
	go func() {
		t := time.NewTicker(90 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
			case <-buf.Full():
			}
			buf.Drain()
		}
	}()
	key := []byte("user000000001234")
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			buf.Record(3, key)
		}
	})
	close(stop)
}

// The drain hands the hot-key summary each hint's hash (so it is computed once); it must be the
// descriptor's own, with and without RecurringOnly's compaction.
func TestDrainedHashesMatchHints(t *testing.T) {
	for _, cfg := range []BufferConfig{{}, {RecurringOnly: true}} {
		b, err := NewBuffer(cfg)
		if err != nil {
			t.Fatal(err)
		}
		for round := 0; round < 3; round++ {
			for i := 0; i < 300; i++ {
				b.Record(uint64(1+i%3), []byte(fmt.Sprintf("user%04d", (i*7+round)%90)))
				if i%13 == 0 {
					// Seen once: withheld under RecurringOnly, so the kept hints (and hashes) shift.
					b.Record(uint64(1+i%3), []byte(fmt.Sprintf("once%d-%d", round, i)))
				}
				if i%5 == 0 {
					b.RecordScan(uint64(1+i%3), []byte(fmt.Sprintf("s%03d", i%11)), []byte("t"), i%4, i%2 == 0)
				}
			}
			for _, r := range b.Drain() {
				if len(r.Hashes) != len(r.Hints) {
					t.Fatalf("recurring=%v: range %d: %d hashes for %d hints", cfg.RecurringOnly, r.RangeID, len(r.Hashes), len(r.Hints))
				}
				for i, h := range r.Hints {
					if r.Hashes[i] != h.Hash64() {
						t.Fatalf("recurring=%v: range %d hint %v: hash %x, want %x", cfg.RecurringOnly, r.RangeID, h, r.Hashes[i], h.Hash64())
					}
				}
			}
		}
	}
}
