package jobs

import (
	"context"
	"testing"
	"time"
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
