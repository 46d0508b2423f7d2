package storage

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// A manual compaction of flushed data shows in the log with its reason, levels and bytes.
func TestCompactionsSinceRecordsACompaction(t *testing.T) {
	e, _ := openNew(t)
	start := time.Now()
	for round := 0; round < 2; round++ { // two overlapping flushed tables: the compaction must rewrite
		b := e.NewBatch()
		for i := 0; i < 2000; i++ {
			must(t, b.Set([]byte(fmt.Sprintf("k%05d", i)), []byte(fmt.Sprintf("v%d-%d", round, i))))
		}
		must(t, b.Commit(true))
		must(t, e.db.Flush())
	}
	must(t, e.CompactAll(context.Background()))
	recs := e.CompactionsSince(start)
	if len(recs) == 0 {
		t.Fatal("no compaction recorded after CompactAll")
	}
	var rewrote bool
	for _, r := range recs {
		if r.End.Before(start) || r.Begin.After(r.End) || r.FromLevel < 0 || r.ToLevel < r.FromLevel {
			t.Errorf("implausible record %+v", r)
		}
		if r.InputBytes > 0 && r.OutputBytes > 0 {
			rewrote = true
			// Its inputs were the two flushed tables: the span is every key written.
			if string(r.Span.Smallest) != "k00000" || string(r.Span.Largest) != "k01999" {
				t.Errorf("span [%q, %q], want [k00000, k01999]", r.Span.Smallest, r.Span.Largest)
			}
		}
	}
	if !rewrote {
		t.Errorf("no record rewrote bytes: %+v", recs)
	}
	if got := e.CompactionsSince(time.Now().Add(time.Hour)); len(got) != 0 {
		t.Errorf("CompactionsSince(future) = %d records, want none", len(got))
	}
}

// The log keeps the newest compactionLogSize records, oldest first.
func TestCompactionLogIsBounded(t *testing.T) {
	var e Engine
	for i := 0; i < compactionLogSize+10; i++ {
		e.compLog.add(pebble.CompactionInfo{JobID: i, Reason: "default"})
	}
	recs := e.CompactionsSince(time.Time{})
	if len(recs) != compactionLogSize {
		t.Fatalf("%d records kept, want %d", len(recs), compactionLogSize)
	}
	if recs[0].Job != 10 || recs[len(recs)-1].Job != compactionLogSize+9 {
		t.Errorf("kept jobs %d..%d, want 10..%d", recs[0].Job, recs[len(recs)-1].Job, compactionLogSize+9)
	}
}
