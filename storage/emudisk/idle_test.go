package emudisk

import (
	"testing"
	"time"
)

// secs is the time n tokens take at rate tokens per second.
func secs(n, rate float64) time.Duration { return time.Duration(n / rate * float64(time.Second)) }

// TestIdleWaitsForForegroundDebt: an idle read arriving while foreground callers owe the read bucket
// waits until their debt is paid and the bucket holds its reserve again; the
// foreground's wait is counted in Throttled, the idle one's in IdleWait alone.
func TestIdleWaitsForForegroundDebt(t *testing.T) {
	const rate = 1 << 20
	c := newFakeClock(false)
	d := NewDevice(Options{ReadBytesPerSec: rate}, c)
	burst := rate * burstWindow.Seconds()
	fg := d.charge(opRead, 64<<10) // arrives with others: time stands still, the debt stays
	if want := secs(64<<10-burst, rate); !near(fg, want) {
		t.Fatalf("foreground waits %v, want %v", fg, want)
	}
	c.mu.Lock()
	c.advance = true // from here on one caller's timeline: the idle reader's
	c.mu.Unlock()
	start := c.Now()
	idle := d.chargeIdle(opRead, 4096)
	want := secs(64<<10-burst+idleReserve*burst, rate)
	if idle < want-time.Microsecond || idle > want+10*time.Microsecond {
		t.Fatalf("idle read waits %v, want %v (the foreground's debt %v, then the reserve)", idle, want, fg)
	}
	if el := c.Now().Sub(start); el != idle {
		t.Fatalf("idle read's clock moved %v, its waits sum to %v", el, idle)
	}
	st := d.Stats()
	// chargeIdle is charge's idle path: the operation counters are charge's, the foreground's here.
	if st.IdleOps != 1 || st.IdleWait != idle || st.IdleWaitMax != idle || st.Throttled != fg || st.ReadOps != 1 || st.ReadBytes != 64<<10 {
		t.Fatalf("stats %+v: want 1 idle op waiting %v, throttled %v (the foreground's)", st, idle, fg)
	}
}

// TestIdleNeverDelaysForeground: callers arriving together (time stands still). Idle reads take tokens
// only while the bucket holds its reserve, so any number of them queued leave a following foreground
// read at least the reserve less one of them (at 12 MiB/s, 5 ms of the disk: a 4-KiB miss passes at
// once), and the foreground's waits as they would be without them, less at most the bank above the
// reserve and one idle operation; an idle operation larger than the reserve owes its own excess only.
func TestIdleNeverDelaysForeground(t *testing.T) {
	const rate = 12 << 20
	burst := rate * burstWindow.Seconds()
	fgWaits := func(idleOps int, idleN int64) []time.Duration {
		d := NewDevice(Options{ReadBytesPerSec: rate, IOPS: 1000}, newFakeClock(false))
		for range idleOps {
			d.tryIdle(opRead, idleN) // served or told to wait: a waiting one takes nothing
		}
		var w []time.Duration
		for range 40 {
			w = append(w, d.charge(opRead, 4096))
		}
		return w
	}
	alone := fgWaits(0, 0)
	for _, tc := range []struct {
		name string
		ops  int
		n    int64
	}{
		{"many small idle reads", 100, 4096},
		{"idle reads larger than the bucket", 10, 3 * int64(burst)},
	} {
		// The bank above the reserve and one operation, in bytes or in operations (1 000/s, a
		// burst of 10).
		bound := max(secs((1-idleReserve)*burst+float64(tc.n), rate), secs((1-idleReserve)*10+1, 1000))
		got := fgWaits(tc.ops, tc.n)
		for i := range got {
			if got[i] > alone[i]+bound+time.Microsecond {
				t.Errorf("%s: foreground read %d waits %v; alone %v, bound %v more", tc.name, i, got[i], alone[i], bound)
			}
		}
		if got[0] != 0 && float64(tc.n) <= idleReserve*burst-4096 {
			t.Errorf("%s: the first foreground read after idle ones waits %v: the reserve should serve it", tc.name, got[0])
		}
	}
}

// TestIdleServedOrRefused: on a full bucket, idle reads pass while it holds the reserve and the
// next waits; an idle read larger than the bucket passes on a full one owing its excess, and the next
// waits until that debt is paid and the reserve banked.
func TestIdleServedOrRefused(t *testing.T) {
	const rate = 1 << 20
	burst := rate * burstWindow.Seconds()
	d := NewDevice(Options{ReadBytesPerSec: rate}, newFakeClock(false))
	for i := 0; i < 2; i++ {
		if w, _ := d.tryIdle(opRead, 4096); w != 0 {
			t.Fatalf("idle read %d on a bucket holding its reserve waits %v", i, w)
		}
	}
	if w, _ := d.tryIdle(opRead, 4096); w == 0 {
		t.Fatal("an idle read took the foreground's reserve")
	}
	d = NewDevice(Options{ReadBytesPerSec: rate}, newFakeClock(false))
	big := 3 * int64(burst)
	if w, debt := d.tryIdle(opRead, big); w != 0 || !near(debt, secs(float64(big)-burst, rate)) {
		t.Fatalf("large idle read on a full bucket: wait %v, debt %v; want 0, %v", w, debt, secs(float64(big)-burst, rate))
	}
	if w, _ := d.tryIdle(opRead, 4096); !near(w, secs(float64(big)-burst+idleReserve*burst, rate)) {
		t.Fatalf("idle read after a large one waits %v: not for its debt and the reserve", w)
	}
}

// TestIdleLargeReadNotStarved: idle readers polling for tokens share them whatever their sizes: a
// larger idle read (an index block) starts at the same bucket level as a 4-KiB one, so smaller ones
// draining the bucket to that level do not keep it waiting (nor a foreground read sharing its load).
func TestIdleLargeReadNotStarved(t *testing.T) {
	const rate = 12 << 20
	burst := rate * burstWindow.Seconds()
	c := newFakeClock(false)
	d := NewDevice(Options{ReadBytesPerSec: rate}, c)
	for {
		if w, _ := d.tryIdle(opRead, 4096); w > 0 {
			break // the small readers have drained the bucket to its reserve
		}
	}
	c.Advance(secs(4096, rate)) // a 4-KiB read's worth banks above the reserve
	if w, debt := d.tryIdle(opRead, 40<<10); w != 0 || debt != 0 {
		t.Fatalf("a 40-KiB idle read where a 4-KiB one would pass: wait %v, debt %v", w, debt)
	}
	if got := d.readBytes.tokens; got < idleReserve*burst-40<<10 {
		t.Fatalf("after it the bucket holds %.0f, below the reserve less the read", got)
	}
}

// TestIdleFullRateAlone: alone on the device, idle reads go at its full rate, also on a clock whose
// every sleep lasts at least 1.2 ms (the real one's, several 4-KiB reads' worth at 12 MiB/s): the
// bucket banks what an oversleep accrues, down to the reserve.
func TestIdleFullRateAlone(t *testing.T) {
	const rate, n, ops = 12 << 20, 4096, 3000
	for _, minSleep := range []time.Duration{0, 1200 * time.Microsecond} {
		c := newFakeClock(true)
		c.minSleep = minSleep
		d := NewDevice(Options{ReadBytesPerSec: rate}, c)
		start := c.Now()
		for range ops {
			d.chargeIdle(opRead, n)
		}
		el := c.Now().Sub(start)
		ideal := secs(ops*n, rate)
		if el < ideal*97/100 || el > ideal*102/100 {
			t.Errorf("min sleep %v: %d idle reads took %v, the full rate's %v", minSleep, ops, el, ideal)
		}
		if st := d.Stats(); st.IdleOps != ops || st.Throttled != 0 {
			t.Errorf("min sleep %v: stats %+v", minSleep, st)
		}
	}
}
