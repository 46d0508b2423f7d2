package stream

import (
	"context"
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
