package sim

import (
	"os/exec"
	"strings"
	"testing"
)

// TestImportsNoNodeLayer: the simulator runs the autopilot's own code against a model of the cluster;
// importing a node layer (directly or through a dependency) would mean it runs something else. Of
// bench it may use only the leaves of the report format and the scenarios' shapes, whose own dependencies are checked with the rest.
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
		if rel == "bench/report" || rel == "bench/scenario/shape" { // leaves real and simulated runs share: the report format, the scenarios' shapes
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
