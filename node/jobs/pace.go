package jobs

import (
	"context"
	"hash/fnv"
	"sync"
	"time"

	"github.com/shoaldb/shoal/stopper"
)

// chunkTime is how long one paced read's page lasts at its rate: a stream at rate r reads pages of
// about r·chunkTime bytes, so that no second of it reads more than its rate and a page's burst at
// the disk's speed stays short (a 1 000-row page of 1 KiB rows is a megabyte at once).
const chunkTime = 100 * time.Millisecond

// minChunkRows is the fewest rows a paced page asks for (a page costs a request of its own).
const minChunkRows = 16

// prefetchBurst bounds a prefetch's page by what its node's disk reads in that time: the engine reads
// a page block by block at the disk's speed, and a page of 10 ms of it (128 KiB at 12 MiB/s) spends
// the device's banked idle time, so the foreground's misses after it wait at the disk's rate instead of
// passing at once; pages of a few ms leave most of it. Pages stay about chunkTime at their rate below
// that (at the scenario's 0.4–0.5 MB/s a prefetch, 48-row pages of 4 ms of its disk): a page costs a
// request, a range lookup and an iterator whatever its size (1-KiB rows: about 80 ms of CPU a
// megabyte in 32-row pages, 52 in 128-row ones), but that is CPU, not the disk the foreground waits on.
const prefetchBurst = 4 * time.Millisecond

// pacer meters a stream of reads at a rate in small pages, without catching up: a stream that fell
// behind (its reads queued on a busy disk, or it started late) goes on at its rate from where it is
// rather than reading at the disk's speed until it is back on its schedule. Not safe for concurrent
// use: one per stream.
type pacer struct {
	rate     float64 // bytes/s; <= 0 does not pace
	maxRows  int
	next     time.Time // when the next page may begin
	rowBytes float64   // the mean bytes of a row read so far (0: none read yet)
	maxBytes float64   // the most a page asks for once rows are measured (0: chunkTime at the rate)
	// phase, in (0, 1], sizes the second page (the first sized by rows): that fraction of the others,
	// so that streams begun together at one rate read their pages at different moments (0: whole).
	phase float64
	pages int // pages recorded so far
}

func newPacer(rate int64, maxRows int) *pacer {
	return &pacer{rate: float64(rate), maxRows: max(1, maxRows), next: time.Now()}
}

// rows is how many rows the next page should ask for.
func (p *pacer) rows() int {
	if p.rate <= 0 {
		return p.maxRows
	}
	if p.rowBytes == 0 {
		return min(p.maxRows, minChunkRows) // the first page measures the rows
	}
	want := p.rate * chunkTime.Seconds()
	if p.maxBytes > 0 {
		want = min(want, p.maxBytes)
	}
	n := min(p.maxRows, max(minChunkRows, int(want/p.rowBytes)))
	if p.pages == 1 && p.phase > 0 && p.phase < 1 {
		return max(1, int(float64(n)*p.phase))
	}
	return n
}

// wait records a page of n bytes in rows rows that began at began, and sleeps until the next page
// may begin: the page's bytes at the rate after the later of its own beginning and its slot.
func (p *pacer) wait(ctx context.Context, began time.Time, n int64, rows int) error {
	p.pages++
	if rows > 0 && n > 0 {
		cur := float64(n) / float64(rows)
		if p.rowBytes == 0 {
			p.rowBytes = cur
		} else {
			p.rowBytes = 0.8*p.rowBytes + 0.2*cur
		}
	}
	if p.rate <= 0 {
		return ctx.Err()
	}
	if began.After(p.next) {
		p.next = began // behind: no catch-up
	}
	p.next = p.next.Add(time.Duration(float64(n) / p.rate * float64(time.Second)))
	return stopper.SleepContext(ctx, time.Until(p.next))
}

// phaseOf is a prefetch's page phase (pacer.phase) from its copy's key. The scenario's plans begin a
// node's four prefetches in one slot at one rate: whole pages would come in lockstep, each burst four
// pages long, and with turns still one after another: the device's banked idle time (10 ms of its
// bandwidth) spent at once, and a foreground read then waiting at the disk's rate. Spread, each page
// alone leaves most of the bank to the foreground. From the key, not at random, so a re-plan keeps it.
func phaseOf(key string) float64 {
	h := fnv.New32a()
	h.Write([]byte(key))
	return float64(h.Sum32()%1000+1) / 1000
}

// diskTurns lets one prefetch page at a time read from each node's disk. A page's blocks go to the
// device one after another, so one reader puts at most one block ahead of a foreground read in the
// disk's queue; three or four prefetches running at once on a node (their plan's rates add up, the
// disk is far from busy) would put one each, and a foreground read arriving among them waited for
// all: the jobs' reads take turns instead, a lower priority than the foreground's. Each page is a
// few milliseconds of the disk against its 100 ms slot, so the turns cost the pacing nothing.
type diskTurns struct {
	mu    sync.Mutex
	nodes map[uint64]chan struct{}
}

// take waits for node's turn (or ctx) and returns its release.
func (t *diskTurns) take(ctx context.Context, node uint64) (release func(), err error) {
	t.mu.Lock()
	if t.nodes == nil {
		t.nodes = map[uint64]chan struct{}{}
	}
	ch := t.nodes[node]
	if ch == nil {
		ch = make(chan struct{}, 1)
		t.nodes[node] = ch
	}
	t.mu.Unlock()
	select {
	case ch <- struct{}{}:
		return func() { <-ch }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}
