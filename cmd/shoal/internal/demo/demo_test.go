package demo

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/shoaldb/shoal/server/resp"
	"github.com/shoaldb/shoal/storage"
)

func TestHasStore(t *testing.T) {
	dir := t.TempDir()
	check := func(name string, want bool, wantErr string) {
		t.Helper()
		got, err := hasStore(filepath.Join(dir, name))
		if got != want || (wantErr == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), wantErr)) {
			t.Errorf("hasStore(%s) = %v, %v; want %v, %q", name, got, err, want, wantErr)
		}
	}
	check("missing", false, "")
	os.MkdirAll(filepath.Join(dir, "logonly"), 0o755)
	os.WriteFile(filepath.Join(dir, "logonly", demoLogFile), []byte("x"), 0o644)
	check("logonly", false, "")
	os.MkdirAll(filepath.Join(dir, "junk"), 0o755)
	os.WriteFile(filepath.Join(dir, "junk", "file"), []byte("x"), 0o644)
	check("junk", false, "not a Shoal store")
	e, err := storage.Open(filepath.Join(dir, "store"), storage.Options{CreateIfMissing: true})
	if err != nil {
		t.Fatal(err)
	}
	check("store", false, "in use")
	e.Close()
	check("store", true, "")
}

func TestDemoAssignPorts(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	free, err := pickFreeAddrs(1)
	if err != nil {
		t.Fatal(err)
	}
	statePath := filepath.Join(t.TempDir(), demoStateFile)
	d := &demo{dir: "D", nodes: []*demoNode{
		{num: 1, addrs: demoAddrs{GRPC: free[0], HTTP: busy.Addr().String()}},
		{num: 2},
	}}
	if err := d.assignPorts(statePath); err != nil {
		t.Fatal(err)
	}
	a := d.nodes[0].addrs
	if a.GRPC != free[0] || a.HTTP == busy.Addr().String() || a.HTTP == "" || a.RESP == "" {
		t.Errorf("node 1 addresses %+v: want the free recorded one kept, the busy one replaced", a)
	}
	seen := map[string]bool{}
	for _, n := range d.nodes {
		for _, x := range []string{n.addrs.GRPC, n.addrs.HTTP, n.addrs.RESP} {
			if x == "" || seen[x] {
				t.Errorf("address %q empty or repeated: %+v", x, d.nodes)
			}
			seen[x] = true
		}
	}

	// A node with a store keeps its addresses: a busy one is an error.
	d = &demo{dir: "D", nodes: []*demoNode{{num: 1, hasStore: true, addrs: demoAddrs{GRPC: busy.Addr().String()}}}}
	if err := d.assignPorts(statePath); err == nil || !strings.Contains(err.Error(), "in use") {
		t.Errorf("busy recorded address of a node with a store: %v", err)
	}

	// demo.json round trip.
	s := demoState{Nodes: []demoAddrs{{GRPC: "127.0.0.1:1", HTTP: "127.0.0.1:2", RESP: "127.0.0.1:3"}}}
	if err := saveDemoState(statePath, s); err != nil {
		t.Fatal(err)
	}
	if got, err := loadDemoState(statePath); err != nil || len(got.Nodes) != 1 || got.Nodes[0] != s.Nodes[0] {
		t.Errorf("loadDemoState = %+v, %v", got, err)
	}
	os.WriteFile(statePath, []byte("{"), 0o644)
	if _, err := loadDemoState(statePath); err == nil || !strings.Contains(err.Error(), "fix or remove") {
		t.Errorf("corrupt demo.json: %v", err)
	}
}

func TestSampleData(t *testing.T) {
	kvs := sampleData()
	if len(kvs) != 1000 {
		t.Fatalf("%d keys, want 1000", len(kvs))
	}
	keys := map[string]bool{}
	var order []string
	for _, kv := range kvs {
		if keys[kv[0]] {
			t.Errorf("duplicate key %s", kv[0])
		}
		keys[kv[0]] = true
		order = append(order, kv[0])
		if !json.Valid([]byte(kv[1])) {
			t.Errorf("%s: value is not JSON: %s", kv[0], kv[1])
		}
	}
	if !sort.StringsAreSorted(order) {
		t.Error("sample keys are not in key order")
	}
	for _, k := range []string{"user/0000", "user/0001", "user/0949", "city/lisbon", "city/sao-paulo"} {
		if !keys[k] {
			t.Errorf("missing %s", k)
		}
	}
}

func TestLogTail(t *testing.T) {
	p := filepath.Join(t.TempDir(), "log")
	var b strings.Builder
	for i := range 30 {
		fmt.Fprintf(&b, "line %d\n", i)
	}
	os.WriteFile(p, []byte(b.String()), 0o644)
	got := logTail(p, 3)
	if got != "  line 27\n  line 28\n  line 29" {
		t.Errorf("logTail = %q", got)
	}
	if got := logTail(p+".missing", 3); !strings.Contains(got, "cannot read") {
		t.Errorf("logTail of a missing file = %q", got)
	}
}

func TestRedisSample(t *testing.T) {
	kvs := redisSample(sampleData())
	if len(kvs) != len(sampleCities) {
		t.Fatalf("%d Redis keys, want one per city (%d)", len(kvs), len(sampleCities))
	}
	for _, kv := range kvs {
		n, ok := resp.NameOf([]byte(kv[0]))
		if !ok || !strings.HasPrefix(string(n.Key), "city/") || n.Hash {
			t.Errorf("%q is not the Redis string of a city: %+v %v", kv[0], n, ok)
		}
	}
}
