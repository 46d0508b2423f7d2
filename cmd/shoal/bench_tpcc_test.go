package main

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shoaldb/shoal/client/clienttest"
	"github.com/shoaldb/shoal/node"
	"github.com/shoaldb/shoal/storage"
)

// TestBenchTPCC loads and runs the mix through the command on a one-node store: JSON on stdout and
// in --out, load progress on stderr, the check; then a run only (--no-load) in text.
func TestBenchTPCC(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	nd, err := node.StartServing(context.Background(), node.Config{DataDir: t.TempDir(), Addr: lis.Addr().String(), Bootstrap: true,
		Storage: storage.Options{CacheBytes: 8 << 20}}, lis)
	if err != nil {
		t.Fatal(err)
	}
	defer nd.Kill()
	hosts := lis.Addr().String()
	out := filepath.Join(t.TempDir(), "run.json")
	sizes := []string{"--items", "50", "--customers", "20", "--warehouses", "2"}
	code, stdout, stderr := benchRun(t, append([]string{"bench", "tpcc", "--hosts", hosts, "--threads", "3", "--duration", "1s",
		"--check", "--format", "json", "--out", out, "--seed", "7"}, sizes...)...)
	if code != 0 {
		t.Fatalf("exit %d, stderr %s", code, stderr)
	}
	type report struct {
		Note       string `json:"note"`
		Warehouses int    `json:"warehouses"`
		Txns       []struct {
			Name   string `json:"name"`
			Count  int64  `json:"count"`
			Errors int64  `json:"errors"`
		} `json:"transactions"`
		Total  int64   `json:"total"`
		Errors int64   `json:"errors"`
		TpmC   float64 `json:"tpmC"`
		Check  string  `json:"check"`
		Load   *struct {
			Rows int64 `json:"rows"`
		} `json:"load"`
	}
	var rep, fromFile report
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("stdout is not one JSON report: %v\n%s", err, stdout)
	}
	if rep.Warehouses != 2 || rep.Total == 0 || rep.Errors != 0 || rep.Check != "ok" || rep.Load == nil || rep.Load.Rows == 0 ||
		len(rep.Txns) != 5 || !strings.Contains(rep.Note, "non-transactional") {
		t.Fatalf("report %+v", rep)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &fromFile); err != nil || fromFile.Total != rep.Total {
		t.Fatalf("--out file: %v, total %d, want %d", err, fromFile.Total, rep.Total)
	}
	if !strings.Contains(stderr, "load: ") || !strings.Contains(stderr, " rows in ") {
		t.Fatalf("no load progress on stderr: %q", stderr)
	}

	code, stdout, stderr = benchRun(t, append([]string{"bench", "tpcc", "--hosts", hosts, "--no-load", "--threads", "2", "--duration", "500ms"}, sizes...)...)
	if code != 0 {
		t.Fatalf("--no-load: exit %d, stderr %s", code, stderr)
	}
	for _, want := range []string{"new_order", "stock_level", "tpmC (new orders a minute): ", "not a TPC-C result"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("text report lacks %q:\n%s", want, stdout)
		}
	}
	if strings.Contains(stdout, "load: ") {
		t.Errorf("--no-load reports a load:\n%s", stdout)
	}

	// A second load finds the tables; a run with other sizes is refused.
	code, _, stderr = benchRun(t, append([]string{"bench", "tpcc", "--hosts", hosts, "--duration", "0"}, sizes...)...)
	if code != 1 || !strings.Contains(stderr, "--no-load") {
		t.Errorf("second load: exit %d, stderr %q", code, stderr)
	}
	code, _, stderr = benchRun(t, "bench", "tpcc", "--hosts", hosts, "--no-load", "--items", "60", "--customers", "20", "--warehouses", "2", "--duration", "100ms")
	if code != 1 || !strings.Contains(stderr, "give the load's sizes") {
		t.Errorf("other sizes: exit %d, stderr %q", code, stderr)
	}
}

func TestBenchTPCCErrors(t *testing.T) {
	cl := clienttest.New(t, 1)
	addr := cl.Addr(1)
	for _, c := range []struct {
		argv   []string
		code   int
		stderr string
	}{
		{[]string{"--warehouses", "0"}, 2, "warehouses 0: need at least 1"},
		{[]string{"--items", "10"}, 2, "items 10: need at least 15"},
		{[]string{"--customers", "5"}, 2, "customers per district 5"},
		{[]string{"--threads", "0"}, 2, "invalid --threads"},
		{[]string{"--duration", "-1s"}, 2, "invalid --duration"},
		{[]string{"--rate", "-5"}, 2, "invalid --rate"},
		{[]string{"--load", "--no-load"}, 2, "contradict"},
		{[]string{"--no-load", "--duration", "0"}, 2, "does nothing"},
		{[]string{"--format", "yaml"}, 2, "invalid --format"},
		{[]string{"extra"}, 2, "usage"},
		{[]string{"--no-load", "--duration", "1s"}, 1, "load the workload first (--load)"},
	} {
		code, _, errOut := benchRun(t, append([]string{"--host", addr, "bench", "tpcc"}, c.argv...)...)
		if code != c.code || !strings.Contains(errOut, c.stderr) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", c.argv, code, errOut, c.code, c.stderr)
		}
	}
	cl.Stop()
	code, _, errOut := benchRun(t, "bench", "tpcc", "--hosts", addr, "--duration", "1s")
	if code != 1 || !strings.Contains(errOut, "does not answer") {
		t.Errorf("stopped cluster: exit %d, stderr %q", code, errOut)
	}
}
