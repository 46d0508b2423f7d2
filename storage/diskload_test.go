package storage

import (
	"fmt"
	"testing"
	"time"

	"github.com/shoaldb/shoal/storage/emudisk"
)

func TestDeviceUtilization(t *testing.T) {
	o := emudisk.Options{IOPS: 100, ReadBytesPerSec: 1 << 20, WriteBytesPerSec: 1 << 20}
	for _, tc := range []struct {
		name string
		b    emudisk.Stats
		dt   time.Duration
		want float64
	}{
		{"idle", emudisk.Stats{}, time.Second, 0},
		{"half the IOPS", emudisk.Stats{ReadOps: 30, WriteOps: 20}, time.Second, 0.5},
		{"IOPS over half a second", emudisk.Stats{ReadOps: 25}, 500 * time.Millisecond, 0.5},
		{"read bandwidth dominates", emudisk.Stats{ReadOps: 10, ReadBytes: 768 << 10}, time.Second, 0.75},
		{"write bandwidth dominates", emudisk.Stats{WriteOps: 1, WriteBytes: 512 << 10}, time.Second, 0.5},
		{"callers queued", emudisk.Stats{ReadOps: 10, Throttled: time.Millisecond}, time.Second, 1},
		{"capped at 1", emudisk.Stats{ReadOps: 500}, time.Second, 1},
		{"no interval", emudisk.Stats{ReadOps: 5}, 0, 0},
	} {
		if got := deviceUtilization(o, emudisk.Stats{}, tc.b, tc.dt); fmt.Sprintf("%.3f", got) != fmt.Sprintf("%.3f", tc.want) {
			t.Errorf("%s: utilization = %.3f, want %.3f", tc.name, got, tc.want)
		}
	}
	// An unlimited device (no budget) is never busy.
	if got := deviceUtilization(emudisk.Options{NoPageCache: true}, emudisk.Stats{}, emudisk.Stats{ReadOps: 1000}, time.Second); got != 0 {
		t.Errorf("unlimited device: utilization = %v, want 0", got)
	}
}

func TestParseIOTicks(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"  4242 12 339866 1800 1377 1040 45472 2700 0 4532 4500 0 0 0 0 0 0\n", 4532 * time.Millisecond, true},
		{"1 2 3", 0, false},
		{"1 2 3 4 5 6 7 8 9 x 11", 0, false},
	} {
		got, ok := parseIOTicks(tc.in)
		if got != tc.want || ok != tc.ok {
			t.Errorf("parseIOTicks(%q) = %v, %v; want %v, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

// TestDiskUtilizationOfAnEmulatedDevice: an engine on a slow emulated device reads busy while it
// writes, and idle once it has been quiet for a sample interval.
func TestDiskUtilizationOfAnEmulatedDevice(t *testing.T) {
	dev := &emudisk.Options{NoPageCache: true, IOPS: 200, WriteBytesPerSec: 1 << 30, ReadBytesPerSec: 1 << 30}
	e, err := Open(t.TempDir(), Options{CreateIfMissing: true, Device: dev})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if u := e.DiskUtilization(); u != 0 {
		t.Fatalf("first sample = %v, want 0 (nothing measured yet)", u)
	}
	// Synced writes: each is at least two operations of a 200-IOPS device (~5 ms each), so a run of
	// them for more than a sample interval keeps the device busy. A host that stalls the writer for
	// much of a sample leaves the device idle then: the samples go on (within 10 s) until one shows it.
	give := time.Now().Add(10 * time.Second)
	for i, u := 0, 0.0; u < 0.5; {
		if time.Now().After(give) {
			t.Fatalf("utilization while writing = %.2f, want ≥ 0.5 (in some sample within 10 s)", u)
		}
		for end := time.Now().Add(3 * diskSampleEvery); time.Now().Before(end); i++ {
			put(t, e, fmt.Sprintf("k%d", i), "v")
		}
		u = e.DiskUtilization()
	}
	time.Sleep(2 * diskSampleEvery)
	e.DiskUtilization() // closes the interval that still held the writes' tail
	time.Sleep(2 * diskSampleEvery)
	if u := e.DiskUtilization(); u > 0.1 {
		t.Fatalf("utilization when idle = %.2f, want ≤ 0.1", u)
	}
}
