package storage

import (
	"testing"
	"time"

	"github.com/shoaldb/shoal/storage/emudisk"
)

// TestDeviceOption: with Options.Device the engine's I/O goes through an emulated device whose
// counters DeviceStats reports; without it DeviceStats is zero.
func TestDeviceOption(t *testing.T) {
	e, _ := openNew(t)
	put(t, e, "a", "1")
	if st := e.DeviceStats(); st != (emudisk.Stats{}) {
		t.Fatalf("no device, but stats %+v", st)
	}

	dir := t.TempDir()
	dev := &emudisk.Options{NoPageCache: true, WriteBytesPerSec: 1 << 30, ReadBytesPerSec: 1 << 30, IOPS: 1_000_000, Latency: time.Microsecond}
	e, err := Open(dir, Options{CreateIfMissing: true, Device: dev})
	if err != nil {
		t.Fatal(err)
	}
	put(t, e, "k1", "v1", "k2", "v2")
	if err := e.DB().Flush(); err != nil {
		t.Fatal(err)
	}
	st := e.DeviceStats()
	if st.WriteBytes == 0 || st.Syncs == 0 || st.Latency == 0 {
		t.Fatalf("device saw no writes: %+v", st)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	e, err = Open(dir, Options{Device: dev})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if v, ok := mustGet(t, e, "k2"); !ok || v != "v2" {
		t.Fatalf("k2 = %q, %v after reopen", v, ok)
	}
	if st := e.DeviceStats(); st.ReadBytes == 0 || st.Fadvises == 0 {
		t.Fatalf("device saw no reads after reopen: %+v", st)
	}
}
