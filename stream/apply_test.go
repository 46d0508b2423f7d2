package stream

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"

	"github.com/shoaldb/shoal/client"
	"github.com/shoaldb/shoal/pb"
)

// memStore is a Store over a map with kv's version rule, whose next commits can be made ambiguous
// (applied or not, the answer lost).
type memStore struct {
	mu        sync.Mutex
	vals      map[string][]byte
	versions  map[string]uint64
	ambiguous int  // the next commits answer AMBIGUOUS
	applyAmb  bool // … after applying
	commits   int
}

func newMem() *memStore { return &memStore{vals: map[string][]byte{}, versions: map[string]uint64{}} }

func (m *memStore) Get(_ context.Context, key []byte, _ bool) (Entry, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	v, ok := m.vals[string(key)]
	return Entry{Raw: v, Found: ok, Version: m.versions[string(key)]}, nil
}

func (m *memStore) Commit(_ context.Context, req *pb.TxnRequest) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, c := range req.Compares {
		if m.versions[string(c.Key)] != c.Number {
			return false, nil
		}
	}
	m.commits++
	amb := m.ambiguous > 0
	if amb {
		m.ambiguous--
		if !m.applyAmb {
			return false, &client.Error{Code: pb.ErrorCode_AMBIGUOUS}
		}
	}
	for _, op := range req.Success {
		k := string(op.Key)
		if op.Type == pb.TxnOp_DELETE {
			delete(m.vals, k)
			m.versions[k] = 0
			continue
		}
		m.vals[k] = op.Value
		m.versions[k]++
	}
	if amb {
		return false, &client.Error{Code: pb.ErrorCode_AMBIGUOUS}
	}
	return true, nil
}

func (m *memStore) count(t *testing.T, key string) int {
	t.Helper()
	_, data, _, err := DecodeValue(m.vals[key])
	if err != nil {
		t.Fatal(err)
	}
	n, _ := strconv.Atoi(string(data))
	return n
}

func TestApplyExactlyOnce(t *testing.T) {
	ctx := context.Background()
	m := newMem()
	ev := func(pos uint64) Event {
		return Event{Key: []byte(CountPrefix + "a"), Position: pos, Value: []byte("a")}
	}
	want := []pb.IngestResult_Status{pb.IngestResult_APPLIED, pb.IngestResult_DUPLICATE, pb.IngestResult_RETRY, pb.IngestResult_APPLIED}
	for i, pos := range []uint64{1, 1, 3, 2} {
		if got := Apply(ctx, CountJob, m, ev(pos)); got.Status != want[i] {
			t.Fatalf("event %d (position %d): %v, want %v (%v)", i, pos, got.Status, want[i], got.Error)
		}
	}
	// A commit that applied but answered AMBIGUOUS is settled by the position: APPLIED, once.
	m.ambiguous, m.applyAmb = 1, true
	if got := Apply(ctx, CountJob, m, ev(3)); got.Status != pb.IngestResult_APPLIED || string(got.Output) != "3" {
		t.Fatalf("ambiguous applied commit: %v output %q", got.Status, got.Output)
	}
	// One that did not apply is run again.
	m.ambiguous, m.applyAmb = 1, false
	if got := Apply(ctx, CountJob, m, ev(4)); got.Status != pb.IngestResult_APPLIED || string(got.Output) != "4" {
		t.Fatalf("ambiguous lost commit: %v output %q", got.Status, got.Output)
	}
	if n := m.count(t, CountPrefix+"a"); n != 4 {
		t.Fatalf("count %d after 4 distinct events (and 2 replays), want 4", n)
	}
	if got := Apply(ctx, CountJob, m, Event{Key: []byte(CountPrefix + "b"), Position: 1, Value: nil}); got.Status != pb.IngestResult_APPLIED {
		t.Fatalf("second key: %v", got.Status)
	}
}

// Concurrent attempts of one event (a replay racing the original) apply it once.
func TestApplyConcurrentReplays(t *testing.T) {
	ctx := context.Background()
	m := newMem()
	key := []byte(CountPrefix + "k")
	for pos := uint64(1); pos <= 50; pos++ {
		var wg sync.WaitGroup
		applied := make(chan pb.IngestResult_Status, 4)
		for r := 0; r < 4; r++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				applied <- Apply(ctx, CountJob, m, Event{Key: key, Position: pos}).Status
			}()
		}
		wg.Wait()
		close(applied)
		n := 0
		for s := range applied {
			if s == pb.IngestResult_APPLIED {
				n++
			}
		}
		if n != 1 {
			t.Fatalf("position %d applied by %d of 4 concurrent attempts", pos, n)
		}
	}
	if n := m.count(t, string(key)); n != 50 {
		t.Fatalf("count %d, want 50", n)
	}
}

func TestHandlerWritesKeepOtherKeysPositions(t *testing.T) {
	ctx := context.Background()
	m := newMem()
	other := []byte("/s/x/other")
	job := &Job{Name: "t", Start: []byte("/s/x/"), End: []byte("/s/x0"), Key: func(v []byte) ([]byte, error) { return v, nil },
		Handle: func(ctx context.Context, s *State, e Event) ([]byte, error) {
			s.Put(other, e.Value)
			return nil, nil
		}}
	if r := Apply(ctx, job, m, Event{Key: other, Position: 1, Value: other}); r.Status != pb.IngestResult_APPLIED {
		t.Fatal(r.Status, r.Error)
	}
	if r := Apply(ctx, job, m, Event{Key: []byte("/s/x/a"), Position: 1, Value: []byte("v")}); r.Status != pb.IngestResult_APPLIED {
		t.Fatal(r.Status, r.Error)
	}
	pos, data, _, _ := DecodeValue(m.vals[string(other)])
	if pos != 1 || string(data) != "v" {
		t.Fatalf("other key: position %d data %q, want its own position 1 and the new data", pos, data)
	}
	// The event's own key, untouched by the handler, still records the position.
	if pos, _, present, _ := DecodeValue(m.vals["/s/x/a"]); pos != 1 || present {
		t.Fatalf("event key: position %d present %v", pos, present)
	}
}

func statuses(rs []*pb.IngestResult) []pb.IngestResult_Status {
	var out []pb.IngestResult_Status
	for _, r := range rs {
		out = append(out, r.Status)
	}
	return out
}

// A key's run of events is committed in one transaction; repeats, gaps and refusals in it.
func TestApplyRun(t *testing.T) {
	ctx := context.Background()
	m := newMem()
	key := []byte(CountPrefix + "r")
	ev := func(pos uint64, v string) Event { return Event{Key: key, Position: pos, Value: []byte(v)} }
	job := &Job{Name: "refusing", Start: CountJob.Start, End: CountJob.End, Key: CountJob.Key,
		Handle: func(ctx context.Context, s *State, e Event) ([]byte, error) {
			if string(e.Value) == "bad" {
				s.Put(e.Key, []byte("999")) // undone with the refusal
				return nil, Refuse(fmt.Errorf("bad event"))
			}
			return CountJob.Handle(ctx, s, e)
		}}
	A, D, R, F := pb.IngestResult_APPLIED, pb.IngestResult_DUPLICATE, pb.IngestResult_RETRY, pb.IngestResult_FAILED
	for _, c := range []struct {
		evs  []Event
		want []pb.IngestResult_Status
		outs []string
	}{
		{[]Event{ev(1, ""), ev(2, ""), ev(2, ""), ev(3, "")}, []pb.IngestResult_Status{A, A, D, A}, []string{"1", "2", "", "3"}},
		{[]Event{ev(2, ""), ev(4, "bad"), ev(5, ""), ev(7, ""), ev(8, "")}, []pb.IngestResult_Status{D, F, A, R, R}, []string{"", "", "4", "", ""}},
		{[]Event{ev(6, ""), ev(7, "")}, []pb.IngestResult_Status{A, A}, []string{"5", "6"}},
	} {
		before := m.commits
		rs := ApplyRun(ctx, job, m, c.evs)
		if got := statuses(rs); fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Fatalf("run %v: %v, want %v", c.evs, got, c.want)
		}
		for i, r := range rs {
			if string(r.Output) != c.outs[i] {
				t.Fatalf("run %v: event %d output %q, want %q", c.evs, i, r.Output, c.outs[i])
			}
		}
		if m.commits != before+1 {
			t.Fatalf("run %v: %d commits, want one", c.evs, m.commits-before)
		}
	}
	// An ambiguous commit of a run that applied: every event of the run APPLIED, once.
	m.ambiguous, m.applyAmb = 1, true
	rs := ApplyRun(ctx, job, m, []Event{ev(8, ""), ev(9, "")})
	if got := statuses(rs); fmt.Sprint(got) != fmt.Sprint([]pb.IngestResult_Status{A, A}) || string(rs[1].Output) != "8" {
		t.Fatalf("ambiguous run: %v, outputs %q %q", got, rs[0].Output, rs[1].Output)
	}
	if n := m.count(t, string(key)); n != 8 {
		t.Fatalf("count %d after 9 positions of which one refused, want 8", n)
	}
}
