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
	"compaction":   "342eb2ec3d46b4211140ea1eaaac03038b3bdac9f2fc58edf185f8194d8459b5",
	"decommission": "d28c256136a9a63e3bc8c1a07fb230a09fcce09386673e0e79763efed05b2d03",
	"drain":        "1b731bdceb455fb75810ecd475e1f9f0c0f0248bdd4d62e647db0d725422ccea",
	"hotspot":      "9bb1d8c0308038fafa3882a4a988cb00fad9b0b8d9d4d96ed7baeacc0e9904e1",
	"join":         "8386592a75619523f7d85aa3ffef48242915b3ae7469266b2ee20014891f5bd4",
	"merge":        "64d334ecb7dd664656504701edced869b3ff9d526bf982aa8bd14a3bbd37ba37",
	"node-kill":    "a1338f85d7cd8d81ad5fadfac7ece1d4e68d7631062538df5d65cca90e3de629",
	"node-loss":    "f14c00c0094e07716385c0d30b5ffd5f5e8b629ad24c8103998dcda10b9580bb",
	"read-hints":   "94fe43a566cac6d67afe89b1e395554e902dc00d5bc2ed27a948e3cc496fa938",
	"rebalance":    "69e3e6e8226da51f3f126b9f7a7190ba71dc0d4eb89702557cc4aa0aadbf610b",
	"scale":        "f17b6cca98e73cae7235346184f4471e8495bb2f9bb0290c6a0b10c00981fe78",
}
