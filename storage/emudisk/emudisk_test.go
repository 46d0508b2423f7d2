package emudisk

import (
	"bytes"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// fakeClock records every requested sleep; with advance it also moves its time forward by it, as if
// the caller had slept (a single caller's timeline), otherwise time stands still (callers arriving
// together). With minSleep a sleep lasts at least that long, as the real clock's do.
type fakeClock struct {
	mu       sync.Mutex
	now      time.Time
	advance  bool
	minSleep time.Duration
	sleeps   []time.Duration
}

func newFakeClock(advance bool) *fakeClock {
	return &fakeClock{now: time.Unix(1_000_000, 0), advance: advance}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Sleep(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sleeps = append(c.sleeps, d)
	if c.advance {
		c.now = c.now.Add(max(d, c.minSleep))
	}
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func (c *fakeClock) total() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	var t time.Duration
	for _, s := range c.sleeps {
		t += s
	}
	return t
}

func near(a, b time.Duration) bool {
	d := a - b
	return d > -time.Microsecond && d < time.Microsecond
}

func TestBucket(t *testing.T) {
	type step struct {
		after time.Duration // time since the previous take
		n     float64
		want  time.Duration
	}
	ms := time.Millisecond
	for _, tc := range []struct {
		name  string
		rate  float64
		steps []step
	}{
		{"unlimited", 0, []step{{0, 1e9, 0}, {0, 1e9, 0}}},
		// 100 ops/s: burst is 1 op (10 ms of the rate); callers arriving together queue 10 ms apart.
		{"iops queue", 100, []step{{0, 1, 0}, {0, 1, 10 * ms}, {0, 1, 20 * ms}, {0, 1, 30 * ms}}},
		// Paying the debt back: 20 ms later the two ops owed are paid and the next waits 10 ms; once
		// that is paid too and a token has banked, the next passes.
		{"iops repaid", 100, []step{{0, 1, 0}, {0, 1, 10 * ms}, {0, 1, 20 * ms}, {20 * ms, 1, 10 * ms}, {50 * ms, 1, 0}}},
		// Idle time banks at most the burst: 1 s idle still lets only one op through unwaited.
		{"burst cap", 100, []step{{0, 1, 0}, {time.Second, 1, 0}, {0, 1, 10 * ms}}},
		// 1 MiB/s, burst 10 ms = 10485.76 bytes: a 64 KiB write waits for the remainder at the rate.
		{"bytes", 1 << 20, []step{
			{0, 65536, time.Duration((65536 - 10485.76) / (1 << 20) * float64(time.Second))},
			{0, 65536, time.Duration((2*65536 - 10485.76) / (1 << 20) * float64(time.Second))},
		}},
		// A request bigger than the burst is served at the rate, not refused.
		{"bigger than burst", 1000, []step{{0, 10, 0}, {0, 2000, 2 * time.Second}}},
		{"within burst", 1 << 20, []step{{0, 4096, 0}, {0, 4096, 0}, {0, 4096, time.Duration((3*4096 - 10485.76) / (1 << 20) * float64(time.Second))}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newBucket(tc.rate)
			now := time.Unix(1_000_000, 0)
			for i, s := range tc.steps {
				now = now.Add(s.after)
				if got := b.take(now, s.n); !near(got, s.want) {
					t.Fatalf("step %d: take(%v) waits %v, want %v", i, s.n, got, s.want)
				}
			}
		})
	}
}

// writeChunks writes total bytes in chunks through a file of fs.
func writeChunks(t *testing.T, fs vfs.FS, name string, total, chunk int) {
	t.Helper()
	f, err := fs.Create(name, vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	buf := bytes.Repeat([]byte{'x'}, chunk)
	for w := 0; w < total; w += chunk {
		if _, err := f.Write(buf); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestDeviceWaits checks the waits a device requests for file operations, on a fake clock.
func TestDeviceWaits(t *testing.T) {
	ms := time.Millisecond
	t.Run("write bandwidth", func(t *testing.T) {
		clk := newFakeClock(true)
		d := NewDevice(Options{WriteBytesPerSec: 1 << 20}, clk)
		writeChunks(t, d.Wrap(vfs.NewMem()), "a", 1<<20, 64<<10)
		// 1 MiB at 1 MiB/s, less the 10 ms burst banked at the start.
		if got := clk.total(); !near(got, 990*ms) {
			t.Fatalf("slept %v in total, want 990ms (%v)", got, clk.sleeps)
		}
		if len(clk.sleeps) != 16 || !near(clk.sleeps[1], 62500*time.Microsecond) {
			t.Fatalf("sleeps %v: want 16, each after the first 62.5ms", clk.sleeps)
		}
		st := d.Stats()
		if st.WriteBytes != 1<<20 || st.WriteOps != 16 || st.ReadOps != 0 || !near(st.Throttled, 990*ms) {
			t.Fatalf("stats %+v", st)
		}
	})
	t.Run("unthrottled counts but never waits, then waits again", func(t *testing.T) {
		clk := newFakeClock(true)
		d := NewDevice(Options{WriteBytesPerSec: 1 << 20, IOPS: 10, Latency: ms}, clk)
		fs := d.Wrap(vfs.NewMem())
		d.SetUnthrottled(true)
		writeChunks(t, fs, "a", 1<<20, 64<<10)
		if got := clk.total(); got != 0 {
			t.Fatalf("unthrottled: slept %v (%v), want nothing", got, clk.sleeps)
		}
		if st := d.Stats(); st.WriteBytes != 1<<20 || st.WriteOps < 16 || st.Throttled != 0 {
			t.Fatalf("unthrottled: stats %+v, want the 1 MiB counted, nothing throttled", st)
		}
		d.SetUnthrottled(false)
		writeChunks(t, fs, "b", 1<<20, 64<<10)
		// 16 writes at 10 IOPS (less the one banked) and 1 MiB/s: the IOPS budget dominates.
		if got := clk.total(); got < time.Second {
			t.Fatalf("throttled again: slept %v in total, want over a second", got)
		}
	})
	t.Run("reads use their own bandwidth", func(t *testing.T) {
		clk := newFakeClock(false)
		d := NewDevice(Options{WriteBytesPerSec: 1000, ReadBytesPerSec: 1 << 30}, clk)
		fs := d.Wrap(vfs.NewMem())
		f, _ := fs.Create("b", vfs.WriteCategoryUnspecified)
		f.Write(make([]byte, 10)) // within the 10-byte write burst
		clk.sleeps = nil
		p := make([]byte, 10)
		for i := 0; i < 5; i++ {
			if _, err := f.ReadAt(p, 0); err != nil {
				t.Fatal(err)
			}
		}
		if clk.total() != 0 {
			t.Fatalf("reads waited %v on a fast read budget", clk.sleeps)
		}
		f.Write(make([]byte, 10))
		if got := clk.sleeps[len(clk.sleeps)-1]; !near(got, 10*ms) {
			t.Fatalf("second write waited %v, want 10ms", got)
		}
		f.Close()
	})
	t.Run("iops shared by reads writes and syncs", func(t *testing.T) {
		clk := newFakeClock(false) // all arrive at once: waits queue up 10 ms apart
		d := NewDevice(Options{IOPS: 100}, clk)
		f, err := d.Wrap(vfs.NewMem()).Create("c", vfs.WriteCategoryUnspecified)
		if err != nil {
			t.Fatal(err)
		}
		f.Write([]byte("hello"))
		f.Sync()
		f.ReadAt(make([]byte, 5), 0)
		f.SyncData()
		f.SyncTo(5)
		f.Preallocate(0, 100) // not an I/O: no charge
		f.Prefetch(0, 5)
		f.Stat()
		want := []time.Duration{10 * ms, 20 * ms, 30 * ms, 40 * ms}
		if fmt.Sprint(clk.sleeps) != fmt.Sprint(want) {
			t.Fatalf("sleeps %v, want %v", clk.sleeps, want)
		}
		st := d.Stats()
		if st.WriteOps != 4 || st.Syncs != 3 || st.ReadOps != 1 || st.ReadBytes != 5 || st.WriteBytes != 5 {
			t.Fatalf("stats %+v", st)
		}
		f.Close()
	})
	t.Run("latency per op", func(t *testing.T) {
		clk := newFakeClock(true)
		d := NewDevice(Options{Latency: 200 * time.Microsecond}, clk)
		writeChunks(t, d.Wrap(vfs.NewMem()), "d", 3*4096, 4096)
		want := []time.Duration{200 * time.Microsecond, 200 * time.Microsecond, 200 * time.Microsecond}
		if fmt.Sprint(clk.sleeps) != fmt.Sprint(want) {
			t.Fatalf("sleeps %v, want %v", clk.sleeps, want)
		}
		if st := d.Stats(); st.Latency != 600*time.Microsecond || st.Throttled != 0 {
			t.Fatalf("stats %+v", st)
		}
	})
	t.Run("latency adds to the wait", func(t *testing.T) {
		clk := newFakeClock(false)
		d := NewDevice(Options{IOPS: 100, Latency: ms}, clk)
		f, _ := d.Wrap(vfs.NewMem()).Create("e", vfs.WriteCategoryUnspecified)
		f.Write([]byte("a"))
		f.Write([]byte("b"))
		if want := []time.Duration{ms, 11 * ms}; fmt.Sprint(clk.sleeps) != fmt.Sprint(want) {
			t.Fatalf("sleeps %v, want %v", clk.sleeps, want)
		}
	})
	t.Run("off", func(t *testing.T) {
		clk := newFakeClock(true)
		d := NewDevice(Options{}, clk)
		writeChunks(t, d.Wrap(vfs.NewMem()), "f", 1<<20, 64<<10)
		if len(clk.sleeps) != 0 {
			t.Fatalf("an unlimited device slept: %v", clk.sleeps)
		}
		if st := d.Stats(); st.WriteBytes != 1<<20 {
			t.Fatalf("stats %+v", st)
		}
	})
}

// TestMemFSWithoutFd: files with no OS descriptor read and write correctly under NoPageCache, and
// no fadvise is attempted on them.
func TestMemFSWithoutFd(t *testing.T) {
	d := NewDevice(Options{NoPageCache: true}, newFakeClock(true))
	fs := d.Wrap(vfs.NewMem())
	f, err := fs.Create("x", vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	if f.Fd() != vfs.InvalidFd {
		t.Fatalf("MemFS file has fd %d", f.Fd())
	}
	if _, err := f.Write([]byte("hello world")); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	r, err := fs.Open("x", vfs.SequentialReadsOption)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(r)
	if err != nil || string(b) != "hello world" {
		t.Fatalf("read %q, %v", b, err)
	}
	r.Close()
	if st := d.Stats(); st.Fadvises != 0 || st.ReadBytes != 11 {
		t.Fatalf("stats %+v", st)
	}
	if DeviceOf(fs) != d || DeviceOf(vfs.NewMem()) != nil {
		t.Fatal("DeviceOf")
	}
	if fs.Unwrap() == nil {
		t.Fatal("Unwrap")
	}
}

func TestOptionsEnabled(t *testing.T) {
	if (Options{}).Enabled() {
		t.Fatal("zero options enabled")
	}
	for _, o := range []Options{{NoPageCache: true}, {ReadBytesPerSec: 1}, {WriteBytesPerSec: 1}, {IOPS: 1}, {Latency: 1}} {
		if !o.Enabled() {
			t.Fatalf("%+v not enabled", o)
		}
	}
}
