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
	"compaction":   "fe4149e4aaa29d38f994823016ddaa5f8f1a037d4afe19e7047cd93573b9240e",
	"decommission": "efccbc39e429de57d5e5a8ece650d0b737fb63afcf9d1d1e55555cd4961d37db",
	"drain":        "9f33ee19db5e9728478fe984d93c2ef3d96b172abdcf9acefd16a202e8956826",
	"hotspot":      "a8b3876dad5f3181669b832b460cf3076d8097551ef1721e6ed42e7e1919bae9",
	"join":         "2f84a59108dfb297a0125bc3ac35f44a51d83f13342e5bab4eb58b19f5b21041",
	"merge":        "0fda3660768da23e7a5de1b79927ee7587ebcb7d423a90d5b15a88870e3b0644",
	"node-kill":    "8ed023fd4eb5a9d5b60fe3cff6d1d5d0ec903a3122913213b2b36097a0cc383e",
	"node-loss":    "ad5dd864e0fbe5908926d0067351a82406b1d375c344177826c5c7c0c5b28677",
	"read-hints":   "309b0264e7f4bc426b5cc4b6c6d73b7860135c2250d1815a3fc2695dd429c2b1",
	"rebalance":    "c4750a7d80106b64847087bae5b5a2233f5595fb974c4d7500e756376a2cd559",
	"scale":        "fc8abc10a3f74eb32e5e1e42a8e14d9e94e084d1bfec0c8d74f44e930d4ae2fd",
}
