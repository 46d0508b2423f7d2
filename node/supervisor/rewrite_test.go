package supervisor

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/shoaldb/shoal/pb"
	"github.com/shoaldb/shoal/replica"
	"github.com/shoaldb/shoal/storage"
)

// A profile change rewrites the store when its blocks shrink (point reads load less) or grow for
// the scan profile (scans seek less); the write profile's larger blocks wait for its own flushes and
// compactions: the rewrite took most of a restart on a seek-bound disk for nothing read faster.
func TestRewritesOnlyWhatReadsFaster(t *testing.T) {
	for _, c := range []struct {
		profile        string
		oldKiB, newKiB int
		want           bool
	}{
		{"read", 32, 32, false},
		{"scan", 32, 128, true},
		{"read", 128, 32, true},
		{"readwrite", 64, 32, true},
		{"write", 32, 64, false},
		{"read", 4, 32, false},
		{"scan", 4, 128, true},
	} {
		if got := rewrites(c.profile, c.oldKiB<<10, c.newKiB<<10); got != c.want {
			t.Errorf("%s, %d KiB → %d KiB blocks: rewrite %v, want %v", c.profile, c.oldKiB, c.newKiB, got, c.want)
		}
	}
}

// For the scan profile only the ranges whose reads are mostly scans are rewritten: a range of point
// reads reads no faster from larger blocks, and the whole store's rewrite kept the node without
// its leaderships for two minutes on a seek-bound disk. Shrinking blocks, or without a view of the
// reads, the whole store is.
func TestRewriteSpansAreTheScannedRanges(t *testing.T) {
	desc := func(id uint64, start, end string) *pb.RangeDescriptor {
		return &pb.RangeDescriptor{RangeId: id, StartKey: []byte(start), EndKey: []byte(end)}
	}
	descs := []*pb.RangeDescriptor{
		desc(replica.MetaRangeID, "", ""),
		desc(2, "a", "b"), // 95 % of its reads are scans: rewritten
		desc(3, "b", "c"), // half: a point-read range as the classifier counts it
		desc(4, "c", "d"), // all scans, but one every two seconds
		desc(5, "d", "e"), // no stats
		desc(6, "e", ""),  // scans on its followers too, the last range of the keyspace
	}
	c := cluster{scanned: map[uint64][2]float64{
		replica.MetaRangeID: {50, 50},
		2:                   {40, 38},
		3:                   {40, 20},
		4:                   {0.5, 0.5},
		6:                   {10, 9},
	}}
	got := rewriteSpans(descs, c, true, "scan")
	lo2, hi2 := storage.DataSpan(false, []byte("a"), []byte("b"))
	lo6, hi6 := storage.DataSpan(false, []byte("e"), nil)
	want := []span{{lo2, hi2}, {lo6, hi6}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("scan profile rewrites %q, want %q", got, want)
	}
	if got := rewriteSpans(descs, cluster{scanned: map[uint64][2]float64{}}, true, "scan"); got == nil || len(got) != 0 {
		t.Fatalf("no range scans: rewrites %q, want nothing (not the whole store)", got)
	}
	if got := rewriteSpans(descs, c, false, "scan"); got != nil {
		t.Fatalf("no view of the reads: rewrites %q, want the whole store", got)
	}
	if got := rewriteSpans(descs, c, true, "read"); got != nil {
		t.Fatalf("blocks shrinking for the read profile: rewrites %q, want the whole store", got)
	}
}

// compactSpans rewrites the tables of the spans it is given with the engine's block size, and
// leaves the others' tables as they are. Each span has its bottom-level table (as a snapshot's
// ingest leaves it) and a flushed table of later writes over it: Pebble's manual compaction
// rewrites a bottom-level table only where newer data overlaps it.
func TestCompactSpansRewritesOnlyTheirTables(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	opts := storage.Options{Profile: "readwrite", MemoryBytes: 8 << 20, CreateIfMissing: true}
	e, err := storage.Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	spans := map[string]span{}
	for _, name := range []string{"a", "b"} {
		lo, hi := storage.DataSpan(false, []byte(name), []byte(name+"~"))
		spans[name] = span{lo, hi}
		i := 0
		err := e.IngestSpan(ctx, lo, hi, func() ([]byte, []byte, bool) {
			i++
			return append(append([]byte{}, lo...), fmt.Sprintf("/%06d", i)...), make([]byte, 1000), i <= 2000
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"a", "b"} {
		b := e.NewBatch()
		for i := 1; i <= 2000; i += 100 {
			if err := b.Set(append(append([]byte{}, spans[name].lo...), fmt.Sprintf("/%06d", i)...), make([]byte, 1000)); err != nil {
				t.Fatal(err)
			}
		}
		if err := b.Commit(true); err != nil {
			t.Fatal(err)
		}
		b.Close()
		if err := e.DB().Flush(); err != nil {
			t.Fatal(err)
		}
	}
	before := dataBlocks(t, e, spans)
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	opts.Profile = "scan"
	if e, err = storage.Open(dir, opts); err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if err := compactSpans(ctx, e, []span{}); err != nil {
		t.Fatal(err)
	}
	if got := dataBlocks(t, e, spans); fmt.Sprint(got) != fmt.Sprint(before) {
		t.Fatalf("no span: tables %v, want them as they were, %v", got, before)
	}
	if err := compactSpans(ctx, e, []span{spans["a"]}); err != nil {
		t.Fatal(err)
	}
	after := dataBlocks(t, e, spans)
	// 2 MB of rows: about 60 blocks of 32 KiB, 15 of 128 KiB.
	if after["a"][1] > before["a"][1]/3 || after["a"][0] == before["a"][0] {
		t.Fatalf("span a: tables %v after its compaction, were %v: want it rewritten with 128 KiB blocks", after["a"], before["a"])
	}
	if after["b"] != before["b"] {
		t.Fatalf("span b: tables %v, were %v: want them untouched", after["b"], before["b"])
	}
}

// dataBlocks is, for each span, the sum of its tables' numbers (which a rewrite changes) and of
// their data blocks.
func dataBlocks(t *testing.T, e *storage.Engine, spans map[string]span) map[string][2]uint64 {
	t.Helper()
	out := map[string][2]uint64{}
	for name, sp := range spans {
		levels, err := e.DB().SSTables(pebble.WithProperties(), pebble.WithKeyRangeFilter(sp.lo, sp.hi))
		if err != nil {
			t.Fatal(err)
		}
		var sum [2]uint64
		for _, ts := range levels {
			for _, tb := range ts {
				sum[0] += uint64(tb.FileNum)
				sum[1] += tb.Properties.NumDataBlocks
			}
		}
		if sum[1] == 0 {
			t.Fatalf("span %s: no data blocks", name)
		}
		out[name] = sum
	}
	return out
}

// A rewrite runs its pieces in order at its share of the time: after a piece that took d it pauses
// d·(1/share − 1), and not after the last, so the disk is the foreground's for the rest.
func TestPacerRunsPiecesAtItsShare(t *testing.T) {
	took := []time.Duration{2 * time.Second, 500 * time.Millisecond, 3 * time.Second}
	for _, c := range []struct {
		share float64
		want  []time.Duration
	}{
		{0.5, []time.Duration{2 * time.Second, 500 * time.Millisecond}},
		{0.25, []time.Duration{6 * time.Second, 1500 * time.Millisecond}},
		{1, nil},
	} {
		now := time.Unix(0, 0)
		var slept []time.Duration
		var done []string
		p := pacer{share: c.share, now: func() time.Time { return now },
			sleep: func(_ context.Context, d time.Duration) error { slept = append(slept, d); now = now.Add(d); return nil }}
		ps := []span{{[]byte("a"), []byte("b")}, {[]byte("b"), []byte("c")}, {[]byte("c"), []byte("d")}}
		err := p.run(context.Background(), ps, func(_ context.Context, lo, hi []byte) error {
			now = now.Add(took[len(done)])
			done = append(done, string(lo)+string(hi))
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(done) != "[ab bc cd]" || fmt.Sprint(slept) != fmt.Sprint(c.want) {
			t.Errorf("share %.2f: pieces %v, pauses %v; want [ab bc cd], %v", c.share, done, slept, c.want)
		}
		busy := 5500 * time.Millisecond
		if got := now.Sub(time.Unix(0, 0)); c.share < 1 && got < time.Duration(float64(busy-took[2])/c.share)+took[2] {
			t.Errorf("share %.2f: took %v, less than its pieces at that share", c.share, got)
		}
	}
	// A cancelled rewrite stops in its pause, with the context's error.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	calls := 0
	err := realPacer.run(ctx, []span{{[]byte("a"), []byte("b")}, {[]byte("b"), []byte("c")}},
		func(context.Context, []byte, []byte) error { calls++; time.Sleep(time.Millisecond); return nil })
	if !errors.Is(err, context.Canceled) || calls != 1 {
		t.Fatalf("cancelled: %d pieces, err %v; want 1, context.Canceled", calls, err)
	}
}

// A span is rewritten a bottom-level table at a time: its pieces start at its tables' first keys
// and cover it without gap; the whole store's cover all engine keys.
func TestPiecesAreTheBottomTables(t *testing.T) {
	ctx := context.Background()
	e, err := storage.Open(t.TempDir(), storage.Options{Profile: "readwrite", MemoryBytes: 8 << 20, CreateIfMissing: true})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	starts := map[string][]byte{}
	for _, name := range []string{"a", "b", "c"} {
		lo, hi := storage.DataSpan(false, []byte(name), []byte(name+"~"))
		i := 0
		err := e.IngestSpan(ctx, lo, hi, func() ([]byte, []byte, bool) {
			i++
			return append(append([]byte{}, lo...), fmt.Sprintf("/%06d", i)...), make([]byte, 100), i <= 100
		})
		if err != nil {
			t.Fatal(err)
		}
		starts[name] = lo // an ingested table starts at its span (its range deletion clears it)
	}
	lo, hi := storage.DataSpan(false, []byte("a"), []byte("c~"))
	got, err := pieces(e, []span{{lo, hi}})
	if err != nil {
		t.Fatal(err)
	}
	want := []span{{lo, starts["b"]}, {starts["b"], starts["c"]}, {starts["c"], hi}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("pieces %q, want %q", got, want)
	}
	all, err := pieces(e, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) < 3 || !bytes.Equal(all[0].lo, wholeStore.lo) || !bytes.Equal(all[len(all)-1].hi, wholeStore.hi) {
		t.Fatalf("whole store: pieces %q, want at least 3 from %q to %q", all, wholeStore.lo, wholeStore.hi)
	}
	for i := 1; i < len(all); i++ {
		if !bytes.Equal(all[i-1].hi, all[i].lo) {
			t.Fatalf("whole store: pieces %q leave a gap at %d", all, i)
		}
	}
}
