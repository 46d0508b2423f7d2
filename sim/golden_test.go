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
	"compaction":   "c49f56380859107e124ebb6e3f466aa2958224d7f9554d5b53c8928498cf3ddd",
	"decommission": "441708503878114ed5ba065c2b6239d5dcd82ebd6fb314a7490083106df001c6",
	"drain":        "7c9113223dc680070a905654819347719a93b98a897e9ec2fa6ee03651dbc1f1",
	"hotspot":      "b8e027cc6414633094546422b2b2fb67f30f7e1c410256bb8dc17125682d2f42",
	"join":         "956ee730cb2cf31b0d1f76de892cc63bf526374baacc0781321f05bfc3cebb2b",
	"merge":        "8714f5e8cb4c48b2e0e8512da55b8fb3ff40d0d4695a69fdc5510d50c383e29d",
	"node-kill":    "ed93a7ebb2593943d3339b819b7a6e1e4d4c476d08c5a094a5b631633f2685d9",
	"node-loss":    "bb72f66e75c6f4831a0ded7d3c760d055ef6daf0385954c8b738078a1f0c3caf",
	"read-hints":   "0b954f8ceff2e2908f5a91a841c9ad5351173e6db25de2e638cf4d78651712e4",
	"rebalance":    "374415a66d206f6f29e88934383b0d75515512108f1601f1bb346a63ffc9e5df",
	"scale":        "94eab1703cebdc4ef23fdd3b0fc29549d9d7a5766ce5da41749908c7582b513c",
}
