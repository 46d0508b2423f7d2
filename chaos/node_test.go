package chaos

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// raceLog is what a node built with -race writes when it sees a race (the detector's format,
// shortened), between its own log lines.
const raceLog = `2026/12/02 11:40:30 INFO node started node=1
==================
WARNING: DATA RACE
Write at 0x00c000123456 by goroutine 7:
  github.com/shoaldb/shoal/kv.(*Store).apply()
      /src/kv/store.go:120 +0x44

Previous read at 0x00c000123456 by goroutine 9:
  github.com/shoaldb/shoal/kv.(*Store).read()
      /src/kv/store.go:80 +0x3c
==================
2026/12/02 11:40:31 INFO replicas changed range=2
==================
WARNING: DATA RACE
Read at 0x00c000999999 by goroutine 12:
==================
`

func TestFirstRace(t *testing.T) {
	for _, tc := range []struct {
		name, log string
		max       int
		count     int
		first     []string // lines the first report must hold
		not       []string // lines it must not
	}{
		{name: "none", log: "2026/12/02 INFO node started node=1\n", max: 40},
		{name: "two reports, the first whole", log: raceLog, max: 40, count: 2,
			first: []string{"WARNING: DATA RACE", "Write at 0x00c000123456", "Previous read at", "store.go:80"},
			not:   []string{"Read at 0x00c000999999", "replicas changed"}},
		{name: "cut at max lines", log: raceLog, max: 3, count: 2,
			first: []string{"WARNING: DATA RACE", "(*Store).apply()"}, not: []string{"Previous read"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			log := filepath.Join(t.TempDir(), "n1.log")
			if err := os.WriteFile(log, []byte(tc.log), 0o644); err != nil {
				t.Fatal(err)
			}
			first, count := (&node{log: log}).firstRace(tc.max)
			if count != tc.count {
				t.Errorf("count %d, want %d", count, tc.count)
			}
			if tc.count == 0 && first != "" {
				t.Errorf("a report from a log without one: %q", first)
			}
			for _, s := range tc.first {
				if !strings.Contains(first, s) {
					t.Errorf("first report %q lacks %q", first, s)
				}
			}
			for _, s := range tc.not {
				if strings.Contains(first, s) {
					t.Errorf("first report %q holds %q", first, s)
				}
			}
		})
	}
}

func TestFirstRaceMissingLog(t *testing.T) {
	if first, count := (&node{log: filepath.Join(t.TempDir(), "none.log")}).firstRace(40); first != "" || count != 0 {
		t.Errorf("a missing log gave %q, %d", first, count)
	}
}
