package hints

import (
	"fmt"
	"reflect"
	"testing"
	"time"
)

// fakePacer is a pacer on a clock the test moves; its sleeps move the clock too.
func fakePacer(clock *time.Time) *pacer {
	p := &pacer{now: func() time.Time { return *clock }}
	p.sleep = func(d time.Duration) { *clock = clock.Add(d) }
	p.since = *clock
	return p
}

func TestPacerPausesAfterEachSlice(t *testing.T) {
	clock := time.Unix(1000, 0)
	p := fakePacer(&clock)
	for _, tc := range []struct {
		work   time.Duration
		pauses int
	}{
		{0, 0},                             // no work since the start: no pause
		{drainSlice - time.Microsecond, 0}, // just under a slice
		{time.Microsecond, 1},              // the slice is up
		{drainSlice / 2, 1},                // the slice restarts after a pause
		{drainSlice, 2},
	} {
		clock = clock.Add(tc.work)
		p.pace()
		if p.pauses != tc.pauses {
			t.Fatalf("after %v more work: %d pauses, want %d", tc.work, p.pauses, tc.pauses)
		}
	}
	var nilPacer *pacer
	nilPacer.pace() // never pauses, never panics
}

// A paced drain pauses every drainPaceEvery entries when each slice is up, and summarizes exactly
// what an unpaced drain does.
func TestPacedDrainSummarizesTheSame(t *testing.T) {
	record := func(b *Buffer) {
		for i := 0; i < 200; i++ {
			b.Record(uint64(1+i%3), []byte(fmt.Sprintf("user%04d", i%70)))
		}
	}
	plain, _ := NewBuffer(BufferConfig{})
	record(plain)
	want := plain.Drain()

	paced, _ := NewBuffer(BufferConfig{})
	record(paced)
	clock := time.Unix(1000, 0)
	p := fakePacer(&clock)
	p.now = func() time.Time { clock = clock.Add(drainSlice); return clock } // every look finds a slice used up
	got := paced.drain(p)
	for i := range got {
		got[i].CapturedAt, want[i].CapturedAt = time.Time{}, time.Time{}
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("paced drain %v, unpaced %v", got, want)
	}
	if wantPauses := 200 / drainPaceEvery; p.pauses != wantPauses {
		t.Fatalf("%d pauses over 200 entries, want %d (one per %d)", p.pauses, wantPauses, drainPaceEvery)
	}
}
