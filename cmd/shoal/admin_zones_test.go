package main

import (
	"strings"
	"testing"

	"github.com/shoaldb/shoal/test/testcluster"
)

// TestZoneConfig: a preference set through the command is listed by it, in text and JSON; clearing
// it leaves none; flags that cannot go together are usage errors.
func TestZoneConfig(t *testing.T) {
	c := testcluster.StartSafe(t, testcluster.Options{Nodes: 1})
	host := "--host=" + c.Nodes[0].Addr
	code, out, errOut := shoal(t, host, "admin", "zone-config", "--lead-zone", "eu-1a", "--start", "user", "--end", "userz")
	if code != 0 || !strings.Contains(out, `["user", "userz")`) || !strings.Contains(out, "eu-1a") {
		t.Fatalf("set: code %d, stdout %q, stderr %q", code, out, errOut)
	}
	code, out, _ = shoal(t, host, "--format", "json", "admin", "zone-config")
	if want := `"zone":"eu-1a"`; code != 0 || !strings.Contains(out, want) || !strings.Contains(out, `"start":"75736572"`) {
		t.Fatalf("list: code %d, stdout %q; want %s and the start in hex", code, out, want)
	}
	code, out, _ = shoal(t, host, "admin", "zone-config", "--clear", "--start", "user", "--end", "userz")
	if code != 0 || !strings.Contains(out, "no leadership zone preferences") {
		t.Fatalf("clear: code %d, stdout %q", code, out)
	}
	for _, argv := range [][]string{
		{"admin", "zone-config", "--lead-zone", "a", "--clear"},
		{"admin", "zone-config", "--start", "a"},
		{"admin", "zone-config", "--lead-zone", "a", "--start", "b", "--end", "a"},
	} {
		if code, _, _ := shoal(t, append([]string{host}, argv...)...); code != 2 {
			t.Errorf("%v: exit %d, want 2 (usage)", argv, code)
		}
	}
}
