package jobs

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shoaldb/shoal/pb"
)

// TestPacerNoCatchUp: pages are sized to the rate, and a stream that fell behind goes on at its
// rate from where it is instead of reading ahead to its schedule.
func TestPacerNoCatchUp(t *testing.T) {
	p := newPacer(100_000, 1000) // 100 kB/s, pages of about 10 kB
	if p.rows() != minChunkRows {
		t.Fatalf("first page %d rows, want %d", p.rows(), minChunkRows)
	}
	ctx := context.Background()
	// A page of 16 rows of 100 bytes that began an hour late: no credit for the hour.
	began := time.Now()
	p.next = began.Add(-time.Hour)
	if err := p.wait(ctx, began, 1600, 16); err != nil {
		t.Fatal(err)
	}
	if got := p.next.Sub(began); got != 16*time.Millisecond {
		t.Fatalf("next page %v after the late one began, want 16ms (its bytes at the rate)", got)
	}
	if got := p.rows(); got != 100 {
		t.Fatalf("page of %d rows, want 100 (rate × %v ÷ 100 bytes)", got, chunkTime)
	}
	if got := newPacer(0, 1000).rows(); got != 1000 {
		t.Fatalf("unpaced page %d rows, want 1000", got)
	}
}

// TestPacerPageRows: a page is about chunkTime at the stream's rate, within the fewest and the most
// rows a page asks for, whatever its rows' size.
func TestPacerPageRows(t *testing.T) {
	for _, tc := range []struct {
		rate     int64
		rowBytes float64
		want     int
	}{
		{rate: 6 << 20, rowBytes: 1024, want: 614},   // 629 KB of rate·chunkTime
		{rate: 1_700_000, rowBytes: 1024, want: 166}, // a prefetch's rate in the scan-jobs scenario
		{rate: 100_000, rowBytes: 1024, want: 16},    // 10 kB: at least minChunkRows
		{rate: 64 << 20, rowBytes: 1024, want: 1000}, // at most maxRows
		{rate: 6 << 20, rowBytes: 65536, want: 16},   // rows larger than a page: the fewest
	} {
		p := newPacer(tc.rate, 1000)
		p.rowBytes = tc.rowBytes
		if got := p.rows(); got != tc.want {
			t.Errorf("rate %d, rows of %v bytes: %d rows a page, want %d", tc.rate, tc.rowBytes, got, tc.want)
		}
	}
}

// TestPacerPrefetchPages: a prefetch's pages are at most prefetchBurst of its disk once its rows are
// measured (a 6 MiB/s prefetch on a 12 MiB/s disk: 50 kB, not 629), chunkTime at its rate below that,
// and still metered at its rate: the page's bytes set when the next begins.
func TestPacerPrefetchPages(t *testing.T) {
	burst := float64(12<<20) * prefetchBurst.Seconds()
	fast := newPacer(6<<20, 1000)
	fast.maxBytes = burst
	if got := fast.rows(); got != minChunkRows {
		t.Fatalf("first page %d rows, want %d (the rows' size unknown)", got, minChunkRows)
	}
	fast.rowBytes = 1024
	if got := fast.rows(); got != 49 {
		t.Fatalf("6 MiB/s on a 12 MiB/s disk: %d rows a page, want 49 (4 ms of the disk)", got)
	}
	p := newPacer(300_000, 1000)
	p.maxBytes, p.rowBytes = burst, 1000
	if got := p.rows(); got != 30 {
		t.Fatalf("0.3 MB/s: %d rows a page, want 30 (chunkTime at the rate)", got)
	}
	began := time.Now()
	fast.next = began
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // the wait returns at once; its schedule is still set
	_ = fast.wait(ctx, began, 49*1024, 49)
	if d := fast.next.Sub(began); d < 7*time.Millisecond || d > 9*time.Millisecond {
		t.Fatalf("a 49-kB page at 6 MiB/s set the next page %v later, want about 8 ms", d)
	}
}

// One prefetch page at a time reads from a node's disk; pages on other nodes go on beside it, and a
// page whose context ends while it waits gives up its wait.
func TestDiskTurns(t *testing.T) {
	var turns diskTurns
	ctx := context.Background()
	var inside, most atomic.Int32
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			release, err := turns.take(ctx, 1)
			if err != nil {
				t.Error(err)
				return
			}
			n := inside.Add(1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			time.Sleep(5 * time.Millisecond)
			inside.Add(-1)
			release()
		}()
	}
	wg.Wait()
	if most.Load() != 1 {
		t.Fatalf("%d pages read node 1's disk at once, want 1", most.Load())
	}

	release, err := turns.take(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	other, err := turns.take(ctx, 2)
	if err != nil {
		t.Fatalf("node 2's turn waited for node 1's: %v", err)
	}
	other()
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if _, err := turns.take(short, 1); err == nil {
		t.Fatal("a second page on node 1 got a turn while the first held it")
	}
	release()
	again, err := turns.take(ctx, 1)
	if err != nil {
		t.Fatalf("node 1's turn after its release: %v", err)
	}
	again()
}

// failingScans fails a range's first scans, as a range being elected does, and says when each did.
type failingScans struct {
	*fakeRanges
	fails  int
	failed chan struct{}
}

func (f *failingScans) Scan(ctx context.Context, req *pb.ScanRequest) (*pb.ScanResponse, error) {
	f.mu.Lock()
	fail := f.fails > 0
	f.fails--
	f.mu.Unlock()
	if fail {
		f.failed <- struct{}{}
		return nil, errors.New("no leader yet")
	}
	return f.fakeRanges.Scan(ctx, req)
}

// A prefetch page holds its node's disk turn for each attempt, not through the backoff between
// them: another prefetch of the node reads while the first waits for its range.
func TestTurnPageBackoffOutOfTurn(t *testing.T) {
	f := &failingScans{fakeRanges: newFakeRanges(10), fails: 1, failed: make(chan struct{}, 1)}
	s := New(Config{}, Deps{Ranges: f})
	ctx := context.Background()
	done := make(chan error, 1)
	go func() {
		resp, _, err := s.turnPage(ctx, 1, []byte("k"), []byte("l"), 5)
		if err == nil && len(resp.Kvs) != 5 {
			err = fmt.Errorf("%d rows, want 5", len(resp.Kvs))
		}
		done <- err
	}()
	<-f.failed
	short, cancel := context.WithTimeout(ctx, 40*time.Millisecond) // the backoff is 50 ms
	defer cancel()
	release, err := s.turns.take(short, 1)
	if err != nil {
		t.Fatalf("node 1's turn held through the failed page's backoff: %v", err)
	}
	release()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// A prefetch's second page is its phase's fraction of a page, the others whole: streams begun
// together read their pages at different moments, each still at its rate. A phase comes from the
// copy's key, in (0, 1].
func TestPacerPhase(t *testing.T) {
	p := newPacer(1_000_000, 1000)
	p.phase, p.rowBytes = 0.3, 1000
	p.pages = 1
	if got := p.rows(); got != 30 {
		t.Fatalf("second page %d rows, want 30 (0.3 of 100)", got)
	}
	p.pages = 2
	if got := p.rows(); got != 100 {
		t.Fatalf("third page %d rows, want 100", got)
	}
	seen := map[float64]bool{}
	for _, k := range []string{"c/job01@1/s0", "c/job02@1/s1", "c/job03@1/s2", "c/job04@1/s3"} {
		ph := phaseOf(k)
		if ph <= 0 || ph > 1 || ph != phaseOf(k) {
			t.Fatalf("phase of %q: %v", k, ph)
		}
		seen[ph] = true
	}
	if len(seen) < 3 {
		t.Fatalf("four keys gave %d phases", len(seen))
	}
}
