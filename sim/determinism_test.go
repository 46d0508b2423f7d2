package sim

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// TestSameSeedSameLog: two runs of a scenario with the same seed write byte-identical decision logs
// and reports; the scenarios chosen draw random numbers (elections after a kill, key samples of a
// hot spot, join order).
func TestSameSeedSameLog(t *testing.T) {
	for _, name := range []string{"node-loss", "hotspot", "join"} {
		t.Run(name, func(t *testing.T) {
			sc, _ := Lookup(name)
			var logs, reports [2][]byte
			for i := range logs {
				dir := t.TempDir()
				res, err := Run(sc, Options{Seed: 42, OnlyPolicyOn: true})
				if err != nil {
					t.Fatal(err)
				}
				if err := res.Write(dir); err != nil {
					t.Fatal(err)
				}
				logs[i] = readFile(t, filepath.Join(dir, "decisions.json"))
				reports[i] = readFile(t, filepath.Join(dir, "report.json"))
			}
			if len(logs[0]) < 100 {
				t.Fatalf("decision log too short to compare:\n%s", logs[0])
			}
			if !bytes.Equal(logs[0], logs[1]) {
				t.Fatalf("same seed, different decision logs: %s", firstDiff(logs[0], logs[1]))
			}
			if !bytes.Equal(reports[0], reports[1]) {
				t.Fatalf("same seed, different reports: %s", firstDiff(reports[0], reports[1]))
			}
		})
	}
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// firstDiff shows the first differing line of a and b.
func firstDiff(a, b []byte) string {
	la, lb := bytes.Split(a, []byte("\n")), bytes.Split(b, []byte("\n"))
	for i := 0; i < len(la) && i < len(lb); i++ {
		if !bytes.Equal(la[i], lb[i]) {
			return "line " + strconv.Itoa(i+1) + ": " + string(la[i]) + " vs " + string(lb[i])
		}
	}
	return "lengths differ"
}
