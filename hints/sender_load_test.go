package hints

import (
	"math"
	"testing"
	"time"

	"github.com/shoaldb/shoal/hints/hint"
)

// With RecurringOnly the sender ships a read only once it recurs (in its batch, or within the
// window), raising the count of a read it withheld before so that a recurring-only receiver, which
// never saw it, replays it; a range whose reads were all withheld gets an empty entry.
func TestBufferRecurringOnly(t *testing.T) {
	type drain struct {
		recs     []rec
		want     []string // rendered hints shipped
		ranges   int      // range entries (empty ones included)
		withheld uint64   // sender_one_off drops so far
	}
	for _, tc := range []struct {
		name   string
		drains []drain
	}{
		{
			name: "a read seen once is withheld, its second sighting shipped counting both",
			drains: []drain{
				{recs: []rec{{rangeID: 1, key: "a"}, {rangeID: 1, key: "hot"}, {rangeID: 1, key: "hot"}},
					want: []string{`r1 get "hot" x2`}, ranges: 1, withheld: 1},
				{recs: []rec{{rangeID: 1, key: "a"}, {rangeID: 1, key: "hot"}},
					want: []string{`r1 get "a" x2`, `r1 get "hot" x1`}, ranges: 1, withheld: 1},
				{recs: []rec{{rangeID: 1, key: "a"}},
					want: []string{`r1 get "a" x1`}, ranges: 1, withheld: 1},
			},
		},
		{
			name: "a range with only one-off reads gets an empty entry",
			drains: []drain{
				{recs: []rec{{rangeID: 4, key: "x"}, {rangeID: 5, key: "y"}, {rangeID: 5, key: "y"}},
					want: []string{`r5 get "y" x2`}, ranges: 2, withheld: 1},
			},
		},
		{
			name: "the same key in two ranges is two reads",
			drains: []drain{
				{recs: []rec{{rangeID: 1, key: "k"}}, ranges: 1, withheld: 1},
				{recs: []rec{{rangeID: 2, key: "k"}}, ranges: 1, withheld: 2},
				{recs: []rec{{rangeID: 2, key: "k"}}, want: []string{`r2 get "k" x2`}, ranges: 1, withheld: 2},
			},
		},
		{
			name: "scans recur on the same start, end, limit and direction",
			drains: []drain{
				{recs: []rec{{rangeID: 3, key: "a", end: "m", limit: 10, scan: true}}, ranges: 1, withheld: 1},
				{recs: []rec{{rangeID: 3, key: "a", end: "m", limit: 20, scan: true}}, ranges: 1, withheld: 2},
				{recs: []rec{{rangeID: 3, key: "a", end: "m", limit: 10, scan: true}},
					want: []string{`r3 scan ["a", "m") limit 10 x2`}, ranges: 1, withheld: 2},
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := NewBuffer(BufferConfig{FlushEntries: 100, RecurringOnly: true, RecurWindow: time.Hour})
			if err != nil {
				t.Fatal(err)
			}
			for i, d := range tc.drains {
				for _, r := range d.recs {
					if !r.do(b) {
						t.Fatalf("drain %d: %+v dropped", i, r)
					}
				}
				out := b.Drain()
				if got := render(out); !equalStrings(got, d.want) {
					t.Fatalf("drain %d shipped %q, want %q", i, got, d.want)
				}
				if len(out) != d.ranges {
					t.Fatalf("drain %d: %d range entries, want %d", i, len(out), d.ranges)
				}
				if got := b.Metrics().Dropped[DropSenderOneOff]; got != d.withheld {
					t.Fatalf("drain %d: %d withheld, want %d", i, got, d.withheld)
				}
			}
		})
	}
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// A withheld read is forgotten after one to two windows.
func TestSenderRecentForgets(t *testing.T) {
	var r senderRecent
	w := int64(time.Second)
	h := hint.Hint{Count: 1}
	r.rotate(1, w)
	if r.ship(7, &h) {
		t.Fatal("first sighting shipped")
	}
	r.rotate(1+3*w/2, w)
	if h := (hint.Hint{Count: 1}); !r.ship(7, &h) || h.Count != 2 {
		t.Fatalf("a read withheld in the previous window: shipped with count %d, want shipped with 2", h.Count)
	}
	r.rotate(1+5*w, w)
	if h := (hint.Hint{Count: 1}); r.ship(7, &h) {
		t.Fatal("a read older than two windows remembered")
	}
}

// Sender and receiver both recurring-only: a read served once in each of two batches is replayed
// on the second (the sender ships it counted twice), a read served once is neither shipped nor
// replayed, and an all-withheld range keeps its warmth fresh on the receiver.
func TestRecurringOnlySenderToReceiver(t *testing.T) {
	b, err := NewBuffer(BufferConfig{FlushEntries: 100, RecurringOnly: true, RecurWindow: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	model := newCacheModel()
	a := newTestApplier(t, model, ApplierConfig{Workers: 1, RecurringOnly: true, RecurWindow: time.Hour})
	a.Start()
	ship := func() []hint.RangeHints {
		out := b.Drain()
		a.Receive(hint.BatchFromProto(hint.BatchToProto(1, "", out, time.Now()), time.Now()), time.Now())
		return out
	}
	b.Record(1, []byte("k"))
	b.Record(1, []byte("once"))
	ship()
	eventually(t, 5*time.Second, "warmth from the empty entry", func() bool { return a.Warmth(1).Known })
	if m := a.Metrics(); m.Received != 0 || m.Applied != 0 {
		t.Fatalf("after one sighting each: received %d, applied %d; want nothing shipped", m.Received, m.Applied)
	}
	b.Record(1, []byte("k"))
	ship()
	eventually(t, 5*time.Second, "replay", func() bool { return a.Metrics().Applied == 1 })
	if calls := model.callSet(); len(calls) != 1 || calls["k"] != 1 {
		t.Fatalf("replayed %v, want k once", calls)
	}
	if m := a.Metrics(); m.Dropped[DropOneOff] != 0 {
		t.Fatalf("receiver dropped %d as one-off, want 0", m.Dropped[DropOneOff])
	}
}

// A saturated sender (load at SampleAt or above) records about SampleFraction of its reads until
// the load falls below SampleResume; without a load signal or with SampleFraction 1 it records all.
func TestBufferSamplesUnderLoad(t *testing.T) {
	type step struct {
		load     float64
		fraction float64 // capture fraction after the drain that sampled load
	}
	for _, tc := range []struct {
		name  string
		cfg   BufferConfig
		noLd  bool
		steps []step
	}{
		{name: "no load signal records every read", noLd: true, steps: []step{{1, 1}}},
		{name: "below SampleAt every read", steps: []step{{0.5, 1}, {0.89, 1}}},
		{name: "saturated: half, hysteresis until below SampleResume",
			steps: []step{{0.95, 0.5}, {0.85, 0.5}, {0.79, 1}, {0.85, 1}, {1, 0.5}}},
		{name: "configured thresholds and fraction", cfg: BufferConfig{SampleAt: 0.6, SampleResume: 0.5, SampleFraction: 0.25},
			steps: []step{{0.55, 1}, {0.6, 0.25}, {0.52, 0.25}, {0.4, 1}}},
		{name: "SampleFraction 1 turns sampling off", cfg: BufferConfig{SampleFraction: 1}, steps: []step{{1, 1}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var load float64
			cfg := tc.cfg
			cfg.FlushEntries = 100000
			if !tc.noLd {
				cfg.Load = func() float64 { return load }
			}
			b, err := NewBuffer(cfg)
			if err != nil {
				t.Fatal(err)
			}
			for i, s := range tc.steps {
				load = s.load
				b.Drain() // samples the load
				if got := b.CaptureFraction(); got != s.fraction {
					t.Fatalf("step %d (load %v): capture fraction %v, want %v", i, s.load, got, s.fraction)
				}
				before := b.Metrics()
				const n = 20000
				for j := 0; j < n; j++ {
					b.Record(1, []byte("k"))
				}
				after := b.Metrics()
				b.Drain()
				recorded := float64(b.Metrics().Recorded - before.Recorded)
				sampled := float64(after.Dropped[DropSampled] - before.Dropped[DropSampled])
				if recorded+sampled != n {
					t.Fatalf("step %d: %v recorded + %v sampled out of %d reads", i, recorded, sampled, n)
				}
				if share := recorded / n; math.Abs(share-s.fraction) > 0.03 {
					t.Fatalf("step %d (load %v): recorded %.3f of reads, want about %v", i, s.load, share, s.fraction)
				}
			}
			if m := b.Metrics(); !tc.noLd && tc.cfg.SampleFraction < 1 && m.CaptureLoad != tc.steps[len(tc.steps)-1].load {
				t.Fatalf("capture load metric %v, want %v", m.CaptureLoad, tc.steps[len(tc.steps)-1].load)
			}
		})
	}
}

func TestBufferSampleConfig(t *testing.T) {
	for _, cfg := range []BufferConfig{{SampleFraction: 1.5}, {SampleAt: 0.5, SampleResume: 0.6}} {
		if _, err := NewBuffer(cfg); err == nil {
			t.Errorf("%+v accepted", cfg)
		}
	}
}

// The capture path allocates nothing, sampled or not.
func TestRecordDoesNotAllocateSampled(t *testing.T) {
	for _, load := range []float64{0, 1} {
		b, err := NewBuffer(BufferConfig{FlushEntries: 1 << 20, Load: func() float64 { return load }})
		if err != nil {
			t.Fatal(err)
		}
		b.Drain()
		key := []byte("usertable/user6284781860667377211")
		if n := testing.AllocsPerRun(1000, func() { b.Record(1, key) }); n != 0 {
			t.Errorf("load %v: %v allocations per Record", load, n)
		}
	}
}
