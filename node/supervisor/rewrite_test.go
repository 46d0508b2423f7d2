package supervisor

import "testing"

// A profile change rewrites the store when its blocks shrink (point reads load less) or grow for
// the scan profile (scans seek less); the write profile's larger blocks wait for its own flushes and
// compactions: the rewrite took most of a restart on a seek-bound disk for nothing read faster.
func TestRewritesOnlyWhatReadsFaster(t *testing.T) {
	for _, c := range []struct {
		profile        string
		oldKiB, newKiB int
		want           bool
	}{
		{"read", 32, 32, false},
		{"scan", 32, 128, true},
		{"read", 128, 32, true},
		{"readwrite", 64, 32, true},
		{"write", 32, 64, false},
		{"read", 4, 32, false},
		{"scan", 4, 128, true},
	} {
		if got := rewrites(c.profile, c.oldKiB<<10, c.newKiB<<10); got != c.want {
			t.Errorf("%s, %d KiB → %d KiB blocks: rewrite %v, want %v", c.profile, c.oldKiB, c.newKiB, got, c.want)
		}
	}
}
