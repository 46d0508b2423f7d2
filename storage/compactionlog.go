package storage

import (
	"bytes"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// CompactionRecord is one finished compaction: when it ran, why, and what it rewrote. Its outputs
// are new tables, and blocks are cached per table, so the reads of the key span it rewrote may
// miss until they load them again: the log lets a benchmark set such misses against compactions.
type CompactionRecord struct {
	Job    int
	Reason string // Pebble's: "default", "read", "move", "delete-only", "elision-only", ...
	Begin  time.Time
	End    time.Time
	// FromLevel is the shallowest input level, ToLevel the output level.
	FromLevel, ToLevel int
	InputBytes         uint64
	OutputBytes        uint64
	// Span is the engine-key span its inputs covered: what it rewrote.
	Span Span
	// Inputs are its input levels, shallowest first; OutputTables how many tables it wrote.
	Inputs       []LevelInput
	OutputTables int
	Err          string // why it failed (Pebble cancels some); empty when it succeeded
}

// LevelInput is one input level of a compaction: its tables' count, bytes and span.
type LevelInput struct {
	Level  int
	Tables int
	Bytes  uint64
	Span   Span
	// TableSpans are the spans of its first maxTableSpans tables, in the level's order (the log keeps
	// thousands of records: a deep compaction's hundreds of tables would make it tens of MB).
	TableSpans []Span
}

// Span is a span of engine keys [Smallest, Largest] (both nil when unknown), or [Smallest, Largest)
// when LargestExclusive: a table that ends with a range deletion (a snapshot's ingest, a removed
// replica) has the next range's first key as an exclusive bound.
type Span struct {
	Smallest, Largest []byte
	LargestExclusive  bool
}

// inputSpan is the span of a compaction's input tables and their total size. The keys are copied:
// Pebble reuses the info's buffers.
func inputSpan(info pebble.CompactionInfo) (Span, uint64) {
	var s Span
	var in uint64
	for _, lvl := range info.Input {
		for _, t := range lvl.Tables {
			in += t.Size
			if s.Smallest == nil || bytes.Compare(t.Smallest.UserKey, s.Smallest) < 0 {
				s.Smallest = t.Smallest.UserKey
			}
			// Of two equal largest keys the inclusive one wins: the span then holds that key.
			excl := t.Largest.IsExclusiveSentinel()
			if c := bytes.Compare(t.Largest.UserKey, s.Largest); s.Largest == nil || c > 0 || c == 0 && s.LargestExclusive && !excl {
				s.Largest, s.LargestExclusive = t.Largest.UserKey, excl
			}
		}
	}
	if s.Smallest != nil {
		s.Smallest = bytes.Clone(s.Smallest)
		s.Largest = bytes.Clone(s.Largest)
	}
	return s, in
}

// inputBytes is the total size of a compaction's input tables.
func inputBytes(info pebble.CompactionInfo) uint64 {
	var in uint64
	for _, lvl := range info.Input {
		for _, t := range lvl.Tables {
			in += t.Size
		}
	}
	return in
}

// maxTableSpans bounds the table spans a record keeps per input level.
const maxTableSpans = 16

// compactionLogSize bounds the log: a node under steady load finishes a few compactions a minute.
const compactionLogSize = 4096

// compactionLog keeps the engine's last compactionLogSize finished compactions.
type compactionLog struct {
	mu   sync.Mutex
	recs []CompactionRecord
	next int // where the next record goes once recs is full
}

func (l *compactionLog) add(info pebble.CompactionInfo) {
	end := time.Now()
	r := CompactionRecord{Job: info.JobID, Reason: info.Reason, Begin: end.Add(-info.TotalDuration), End: end,
		FromLevel: -1, ToLevel: info.Output.Level}
	r.Span, r.InputBytes = inputSpan(info)
	for _, lvl := range info.Input {
		if r.FromLevel < 0 || lvl.Level < r.FromLevel {
			r.FromLevel = lvl.Level
		}
		span, in := inputSpan(pebble.CompactionInfo{Input: []pebble.LevelInfo{lvl}})
		li := LevelInput{Level: lvl.Level, Tables: len(lvl.Tables), Bytes: in, Span: span}
		for _, t := range lvl.Tables[:min(len(lvl.Tables), maxTableSpans)] {
			li.TableSpans = append(li.TableSpans, Span{Smallest: bytes.Clone(t.Smallest.UserKey), Largest: bytes.Clone(t.Largest.UserKey),
				LargestExclusive: t.Largest.IsExclusiveSentinel()})
		}
		r.Inputs = append(r.Inputs, li)
	}
	r.OutputTables = len(info.Output.Tables)
	for _, t := range info.Output.Tables {
		r.OutputBytes += t.Size
	}
	if info.Err != nil {
		r.Err = info.Err.Error()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.recs) < compactionLogSize {
		l.recs = append(l.recs, r)
		return
	}
	l.recs[l.next] = r
	l.next = (l.next + 1) % compactionLogSize
}

// CompactionsSince returns the finished compactions that ended at or after since, oldest first
// (at most the last 4096 the engine finished).
func (e *Engine) CompactionsSince(since time.Time) []CompactionRecord {
	l := &e.compLog
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []CompactionRecord
	for i := range l.recs {
		r := l.recs[(l.next+i)%len(l.recs)]
		if !r.End.Before(since) {
			out = append(out, r)
		}
	}
	return out
}
