package ycsb

import (
	"context"
	"strings"
	"testing"

	"github.com/shoaldb/shoal/client"
)

// Two tenants at once on one cluster: each loads and runs its own workload under its own key prefix,
// and reports its own operations.
func TestRunTenants(t *testing.T) {
	base := Config{Target: TargetGRPC, Records: 200, Ops: 800, Threads: 2, Load: true}
	tenants, err := ParseTenants("a:zipfian,e:uniform", base)
	if err != nil {
		t.Fatal(err)
	}
	if len(tenants) != 2 || tenants[0].Name != "t1-a" || tenants[1].Config.Props["requestdistribution"] != "uniform" {
		t.Fatalf("tenants %+v", tenants)
	}
	cl, db := fakeDB(t, tenants[0].Config)
	reps, err := RunTenants(context.Background(), tenants, db)
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(context.Background(), client.Config{Addrs: cl.Addrs()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for i, r := range reps {
		if r.Ops != base.Ops || r.Errors != 0 || r.Properties["table"] != tenants[i].Name {
			t.Fatalf("tenant %s: %d ops, %d errors, table %q", tenants[i].Name, r.Ops, r.Errors, r.Properties["table"])
		}
		kvs, err := c.Scan(context.Background(), []byte(tenants[i].Name+"/"), tableEnd(tenants[i].Name), 0, false)
		if err != nil || len(kvs) < int(base.Records) {
			t.Fatalf("tenant %s: %d records under its prefix (%v)", tenants[i].Name, len(kvs), err)
		}
	}
	if _, ok := reps[1].Operations[OpScan]; !ok {
		t.Fatalf("tenant e ran no scans: %+v", reps[1].Operations)
	}
	for _, bad := range []string{"", "a,,c", "z:uniform"} {
		if _, err := ParseTenants(bad, base); err == nil || !strings.Contains(err.Error(), "tenant") {
			t.Errorf("ParseTenants(%q): %v", bad, err)
		}
	}
}
