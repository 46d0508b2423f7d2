package storage

import (
	"os"
	"testing"
)

// TestBlockDeviceTicks: where the data directory sits on a block device the kernel reports, its
// busy time is read and never goes backwards; elsewhere (overlay, tmpfs) there is no reader.
func TestBlockDeviceTicks(t *testing.T) {
	dir := t.TempDir()
	read := blockDeviceTicks(dir)
	if read == nil {
		if _, err := os.Stat("/sys/dev/block"); err != nil {
			t.Skip("no /sys/dev/block here")
		}
		t.Skipf("%s is on no block device the kernel lists (overlay or tmpfs)", dir)
	}
	a, ok := read()
	if !ok {
		t.Fatal("reader found at start, but the stat file no longer reads")
	}
	if err := os.WriteFile(dir+"/f", make([]byte, 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	b, ok := read()
	if !ok || b < a {
		t.Fatalf("io_ticks went from %v to %v (ok %v)", a, b, ok)
	}
}
