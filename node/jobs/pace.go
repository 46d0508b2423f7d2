package jobs

import (
	"context"
	"time"

	"github.com/shoaldb/shoal/stopper"
)

// chunkTime is how long one paced read's page lasts at its rate: a stream at rate r reads pages of
// about r·chunkTime bytes, so that no second of it reads more than its rate and a page's burst at
// the disk's speed stays short (a 1 000-row page of 1 KiB rows is a megabyte at once).
const chunkTime = 100 * time.Millisecond

// minChunkRows is the fewest rows a paced page asks for (a page costs a request of its own).
const minChunkRows = 16

// A prefetch's pages are sized like a run's, at its rate, not bounded in bytes: a page costs a
// request, a range lookup and a new engine iterator (its index blocks looked up again) whatever its
// size, and on 1-KiB rows through the nodes' scan path the CPU a megabyte costs falls from about
// 80 ms in 32-row pages to 52 in 128-row and 40 in 512-row ones. The disk queues no more behind a
// larger page: the engine reads it block by block, each block one device request, so a foreground
// read waits behind at most the block being read, not the page.

// pacer meters a stream of reads at a rate in small pages, without catching up: a stream that fell
// behind (its reads queued on a busy disk, or it started late) goes on at its rate from where it is
// rather than reading at the disk's speed until it is back on its schedule. Not safe for concurrent
// use: one per stream.
type pacer struct {
	rate     float64 // bytes/s; <= 0 does not pace
	maxRows  int
	next     time.Time // when the next page may begin
	rowBytes float64   // the mean bytes of a row read so far (0: none read yet)
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
	return min(p.maxRows, max(minChunkRows, int(want/p.rowBytes)))
}

// wait records a page of n bytes in rows rows that began at began, and sleeps until the next page
// may begin: the page's bytes at the rate after the later of its own beginning and its slot.
func (p *pacer) wait(ctx context.Context, began time.Time, n int64, rows int) error {
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
