package replica

import (
	"sync"
	"testing"
	"time"

	"github.com/shoaldb/shoal/pb"
	"github.com/shoaldb/shoal/storage"
)

// recorder keeps what an AccessRecorder is told; it measures every other read.
type recorder struct {
	mu     sync.Mutex
	points []string
	rows   int
	scans  int
}

func (a *recorder) SampleRead(_, n uint64) bool { return n%2 == 0 }
func (a *recorder) PointRead(_ uint64, key []byte, _ storage.BlockStats) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.points = append(a.points, string(key))
}
func (a *recorder) Scanned(_ uint64, rows int, _ storage.BlockStats) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.rows, a.scans = a.rows+rows, a.scans+1
}

// The access recorder sees the sampled point reads, which still return their values, and every scan.
func TestAccessRecorder(t *testing.T) {
	env := newStoreEnv(t)
	boot := NewStore(Config{NodeID: 1, Engine: env.eng, Transport: env.tr})
	if err := boot.Bootstrap(userDesc(FirstUserRangeID, "", ""), []*pb.KeyValue{{Key: []byte("a"), Value: []byte("1")}}); err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	s := env.startWith(Config{TickInterval: 5 * time.Millisecond, Access: rec})
	r := s.Replica(FirstUserRangeID)
	lead(t, r)
	propose(t, r, putCmd("b", "2", "c", "3"))
	for range 2 {
		wantValue(t, r, "a", "1")
		wantValue(t, r, "b", "2")
	}
	if got := scanKeys(t, r); len(got) != 3 {
		t.Fatalf("scan: %v", got)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.points) != 2 || rec.scans != 1 || rec.rows != 3 {
		t.Fatalf("measured reads %v, %d scans of %d rows: want 2 of 4 reads, 1 scan of 3 rows", rec.points, rec.scans, rec.rows)
	}
}
