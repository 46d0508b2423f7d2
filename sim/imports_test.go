package sim

import (
	"os/exec"
	"strings"
	"testing"
)

// TestImportsNoNodeLayer: the simulator runs the autopilot's own code against a model of the cluster;
// importing a node layer (directly or through a dependency) would mean it runs something else. Of
// bench it may use only the report format's leaf, whose own dependencies are checked with the rest.
func TestImportsNoNodeLayer(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool on PATH")
	}
	out, err := exec.Command(goTool, "list", "-deps", "-f", "{{.ImportPath}}", "./...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	const mod = "github.com/shoaldb/shoal/"
	forbidden := []string{"kv", "replica", "server", "node", "storage", "transport", "pb", "client", "bench"}
	var sawAutopilot bool
	for _, path := range strings.Fields(string(out)) {
		rel, ok := strings.CutPrefix(path, mod)
		if !ok {
			continue
		}
		sawAutopilot = sawAutopilot || rel == "autopilot"
		if rel == "bench/report" { // the report format real and simulated runs share: a leaf
			continue
		}
		for _, f := range forbidden {
			if rel == f || strings.HasPrefix(rel, f+"/") {
				t.Errorf("sim depends on %s", path)
			}
		}
	}
	if !sawAutopilot {
		t.Fatalf("go list shows no dependency on the autopilot; output:\n%s", out)
	}
}
