package sim

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestDecisionsUnchanged: every scenario (policy on and off), and the scale scenario shrunk to a
// second (30 nodes, 600 ranges, 20 k ops/s, 21 simulated minutes: a node failure at 5 min, three
// nodes joining at 20 min, every policy on), gives the decision logs and report that the autopilot
// gave before its per-round scans of every range were replaced by indexes (at 3237183): the hashes
// are that code's output. A change of what a policy decides changes them (then record the new ones
// and say why in the commit); a change of how fast it decides must not.
func TestDecisionsUnchanged(t *testing.T) {
	if testing.Short() {
		t.Skip("seconds of simulation")
	}
	for name, want := range goldenHashes {
		if raceEnabled && name != "scale" {
			continue // the shrunk scale run covers join, rebalance and replicate at scale in seconds
		}
		t.Run(name, func(t *testing.T) {
			sc, ok := Lookup(name)
			if !ok {
				t.Fatalf("no scenario %s", name)
			}
			opts := Options{Seed: 1}
			if name == "scale" {
				sc.OpsPerSec = 20_000
				opts = Options{Seed: 1, OnlyPolicyOn: true, Nodes: 30, Ranges: 600, Duration: 21 * time.Minute}
			}
			res, err := Run(sc, opts)
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			if err := res.Write(dir); err != nil {
				t.Fatal(err)
			}
			h := sha256.New()
			for _, f := range []string{"report.json", "decisions.json", "decisions-off.json"} {
				b, err := os.ReadFile(filepath.Join(dir, f))
				if err != nil && !os.IsNotExist(err) {
					t.Fatal(err)
				}
				h.Write(b)
			}
			if got := hex.EncodeToString(h.Sum(nil)); got != want {
				t.Errorf("sha256 of report.json, decisions.json and decisions-off.json %s, want %s", got, want)
			}
		})
	}
}

var goldenHashes = map[string]string{
	"compaction":   "87fe2aa04629dcda4f38314e741a6c1b4a787754c56e2bf75ce7f804a353f1fe",
	"decommission": "59ace264d947e7e7ab74ce3ba11de5dde7dffdad9f92f667d71a232f28192ce3",
	"drain":        "91871f38c02c0c84ea74568b9faaa2b82f441a7cabbac96cbdee92bb17a519ca",
	"hotspot":      "d775b15ed6ad58f03fcfafe09adfa56e458a6ed2f8fd53ffd84d128237c5f655",
	"join":         "bcd0e85364af667ea5e281c442cd609ca6dd73ddaec344b0f4d80882e371786e",
	"merge":        "58a7a9f3a850683d460b35ef47f6e165c8e37ae50031b75e80ece8b54a117a16",
	"node-kill":    "5d0ae95d8ff0c5f196b8f0bd9c90aff96672118e2fd0ec429e661de0deac1dad",
	"node-loss":    "865e2e82e5f7dab315097493451225bf5661cf78ff286b23e60c834c4062834e",
	"read-hints":   "5c2a0ce18c8c0475bf80cea30c05a1fcc1a0f9d227aa266f85af820d77fd7d8b",
	"rebalance":    "c42c3e7ec9f1bd09ee186ded8e5069cd0b955db5473181f932f2d77894894486",
	"scale":        "51c17a4397a567ae4b425ac8ba77f9ec5c7cd617e71d418063e4de52f8671afd",
}
