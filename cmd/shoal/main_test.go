package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/shoaldb/shoal/client/clienttest"
)

// resetFlags puts every flag of cmd and its subcommands back to its default, since the commands are
// package globals that keep state between in-process runs.
func resetFlags(cmd *cobra.Command) {
	reset := func(f *pflag.Flag) {
		if sv, ok := f.Value.(pflag.SliceValue); ok {
			// Set appends to a slice flag; put the default list back whole.
			var def []string
			if d := strings.Trim(f.DefValue, "[]"); d != "" {
				def = strings.Split(d, ",")
			}
			_ = sv.Replace(def)
		} else {
			_ = f.Value.Set(f.DefValue)
		}
		f.Changed = false
	}
	cmd.Flags().VisitAll(reset)
	cmd.PersistentFlags().VisitAll(reset)
	for _, c := range cmd.Commands() {
		resetFlags(c)
	}
}

// shoal runs the CLI in process and returns its exit code, stdout and stderr.
func shoal(t *testing.T, argv ...string) (int, string, string) {
	t.Helper()
	resetFlags(rootCmd)
	var out, errOut bytes.Buffer
	code := run(context.Background(), argv, &out, &errOut)
	return code, out.String(), errOut.String()
}

func newCluster(t *testing.T) (*clienttest.Cluster, string) {
	cl := clienttest.New(t, 2)
	return cl, "--host=" + strings.Join(cl.Addrs(), ",")
}

func TestGetMissingKey(t *testing.T) {
	_, host := newCluster(t)
	for _, format := range []string{"text", "json"} {
		code, out, errOut := shoal(t, host, "--format", format, "get", "nope")
		if code != 1 || out != "" || errOut != "not found\n" {
			t.Errorf("format %s: code %d, stdout %q, stderr %q; want 1, \"\", \"not found\\n\"", format, code, out, errOut)
		}
	}
}

func TestDataCommands(t *testing.T) {
	cl, host := newCluster(t)
	cases := []struct {
		argv     []string
		code     int
		stdout   string
		stderrIn string
	}{
		{[]string{"put", "k", "v"}, 0, "OK\n", ""},
		{[]string{"get", "k"}, 0, "v\n", ""},
		{[]string{"--format", "json", "get", "k"}, 0, `{"key":"k","value":"v"}` + "\n", ""},
		{[]string{"--format=json", "put", "k2", "<&>"}, 0, `{"ok":true}` + "\n", ""},
		{[]string{"--format=json", "get", "k2"}, 0, `{"key":"k2","value":"<&>"}` + "\n", ""},
		{[]string{"cas", "k", "wrong", "x"}, 1, "not swapped: current value is \"v\"\n", ""},
		{[]string{"cas", "k", "v", "x"}, 0, "swapped\n", ""},
		{[]string{"--format", "json", "cas", "k", "v", "y"}, 1, `{"swapped":false,"found":true,"current":"x"}` + "\n", ""},
		{[]string{"cas", "lock", "me", "--expect-absent"}, 0, "swapped\n", ""},
		{[]string{"cas", "lock", "", "you", "--expect-absent"}, 1, "not swapped: current value is \"me\"\n", ""},
		{[]string{"--format", "json", "cas", "nokey", "a", "b"}, 1, `{"swapped":false,"found":false,"current":null}` + "\n", ""},
		{[]string{"cas", "lock", "x", "y", "--expect-absent"}, 2, "", "EXPECTED must be empty"},
		{[]string{"del", "k"}, 0, "deleted\n", ""},
		{[]string{"del", "k"}, 0, "not found\n", ""},
		{[]string{"--format", "json", "del", "lock"}, 0, `{"found":true,"key":"lock"}` + "\n", ""},
		{[]string{"get", ""}, 1, "", "Error: invalid argument: key is empty\n"},
		{[]string{"put", ""}, 2, "", "usage: shoal put KEY VALUE"},
		{[]string{"scan", "b", "a"}, 1, "", "Error: invalid argument: scan: start \"b\" is after end \"a\""},
		{[]string{"scan", "a", "", "--limit", "-1"}, 2, "", "invalid --limit"},
	}
	for _, tc := range cases {
		argv := append([]string{host}, tc.argv...)
		code, out, errOut := shoal(t, argv...)
		if code != tc.code || out != tc.stdout || !strings.Contains(errOut, tc.stderrIn) {
			t.Errorf("shoal %q: code %d, stdout %q, stderr %q; want %d, %q, stderr containing %q",
				tc.argv, code, out, errOut, tc.code, tc.stdout, tc.stderrIn)
		}
	}
	if v, _ := cl.Value("k2"); v != "<&>" {
		t.Errorf("k2 = %q", v)
	}
}

func TestScan(t *testing.T) {
	cl, host := newCluster(t)
	for _, k := range []string{"a", "b", "c", "m", "n", "z"} {
		cl.Set(k, "v"+k)
	}
	if _, _, err := cl.Split("m"); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := shoal(t, host, "scan", "b", "")
	if want := "b\tvb\nc\tvc\nm\tvm\nn\tvn\nz\tvz\n"; code != 0 || out != want {
		t.Fatalf("scan text: code %d, stdout %q, stderr %q; want %q", code, out, errOut, want)
	}
	code, out, _ = shoal(t, host, "scan", "", "", "--reverse", "--limit", "4", "--format", "json")
	var kvs []map[string]string
	if err := json.Unmarshal([]byte(out), &kvs); err != nil || code != 0 {
		t.Fatalf("scan json: code %d, %q: %v", code, out, err)
	}
	var keys []string
	for _, kv := range kvs {
		if len(kv) != 2 || kv["value"] != "v"+kv["key"] {
			t.Fatalf("scan json element %v is not {key, value}", kv)
		}
		keys = append(keys, kv["key"])
	}
	if got := strings.Join(keys, ","); got != "z,n,m,c" {
		t.Fatalf("reverse scan keys = %s", got)
	}
	code, out, _ = shoal(t, host, "--format", "json", "scan", "x", "y")
	if code != 0 || out != "[]\n" {
		t.Fatalf("empty scan json = %d %q, want []", code, out)
	}
}

func TestFormatValidation(t *testing.T) {
	_, host := newCluster(t)
	for _, argv := range [][]string{
		{"--format", "yaml", "get", "k"},
		{"--format", "", "admin", "nodes"},
		{"scan", "a", "b", "--format", "JSON"},
	} {
		code, out, errOut := shoal(t, append([]string{host}, argv...)...)
		if code != 2 || out != "" || !strings.Contains(errOut, "Error: invalid --format") {
			t.Errorf("shoal %q: code %d, stdout %q, stderr %q; want 2 and an invalid --format error", argv, code, out, errOut)
		}
	}
}

func TestUsageErrors(t *testing.T) {
	for _, argv := range [][]string{
		{"bogus"},
		{"admin", "bogus"},
		{"get"},
		{"get", "a", "b"},
		{"get", "--no-such-flag", "k"},
		{"admin", "transfer-leader", "x", "1"},
		{"admin", "transfer-leader", "1", "0"},
		{"--timeout", "0s", "get", "k"},
	} {
		code, _, errOut := shoal(t, argv...)
		if code != 2 || !strings.HasPrefix(errOut, "Error: ") || !strings.Contains(errOut, "--help") {
			t.Errorf("shoal %q: code %d, stderr %q; want 2 with an error and a pointer to --help", argv, code, errOut)
		}
	}
}

func TestAdminJSON(t *testing.T) {
	cl, host := newCluster(t)
	code, out, errOut := shoal(t, host, "--format", "json", "admin", "nodes")
	var nodes []map[string]any
	if err := json.Unmarshal([]byte(out), &nodes); err != nil || code != 0 || len(nodes) != 2 {
		t.Fatalf("admin nodes: code %d, %q %q: %v", code, out, errOut, err)
	}
	for _, field := range []string{"id", "addr", "http_addr", "live", "draining", "state", "range_count", "leader_count"} {
		if _, ok := nodes[0][field]; !ok {
			t.Errorf("admin nodes json lacks %q: %v", field, nodes[0])
		}
	}
	if nodes[0]["addr"] != cl.Addr(1) || nodes[0]["live"] != true {
		t.Errorf("node 1 = %v", nodes[0])
	}

	code, out, errOut = shoal(t, host, "--format", "json", "admin", "split", "m")
	var split map[string]map[string]any
	if err := json.Unmarshal([]byte(out), &split); err != nil || code != 0 {
		t.Fatalf("admin split: code %d, %q %q: %v", code, out, errOut, err)
	}
	if split["left"]["end"] != "6d" || split["right"]["start"] != "6d" {
		t.Errorf("split = %v", split)
	}
	rightID := split["right"]["id"].(float64)

	code, _, errOut = shoal(t, host, "admin", "transfer-leader", strconv.Itoa(int(rightID)), "2")
	if code != 0 {
		t.Fatalf("transfer-leader: %d %q", code, errOut)
	}

	code, out, errOut = shoal(t, host, "--format", "json", "admin", "ranges")
	var ranges []map[string]any
	// The meta range (id 1, listed first: its start is empty too) and the two halves of the split.
	if err := json.Unmarshal([]byte(out), &ranges); err != nil || code != 0 || len(ranges) != 3 {
		t.Fatalf("admin ranges: code %d, %q %q: %v", code, out, errOut, err)
	}
	for _, field := range []string{"id", "start", "end", "replicas", "learners", "leader", "generation"} {
		if _, ok := ranges[2][field]; !ok {
			t.Errorf("admin ranges json lacks %q: %v", field, ranges[2])
		}
	}
	if ranges[2]["start"] != "6d" || ranges[2]["end"] != "" || ranges[2]["id"] != rightID || ranges[2]["leader"] != float64(2) {
		t.Errorf("right range = %v", ranges[2])
	}
	if reps, _ := ranges[1]["replicas"].([]any); len(reps) != 2 || ranges[1]["end"] != "6d" {
		t.Errorf("left range = %v", ranges[1])
	}
}

func TestAdminText(t *testing.T) {
	cl, host := newCluster(t)
	if _, _, err := cl.Split("m"); err != nil {
		t.Fatal(err)
	}
	code, out, _ := shoal(t, host, "admin", "ranges")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || len(lines) != 4 || !strings.HasPrefix(lines[0], "ID") || !strings.Contains(lines[1], "(meta)") ||
		!strings.Contains(lines[2], "-inf") || !strings.Contains(lines[3], "+inf") {
		t.Fatalf("admin ranges text: code %d\n%s", code, out)
	}
	// Columns are aligned: START begins at the same offset on every line.
	col := strings.Index(lines[0], "START")
	if !strings.HasPrefix(lines[2][col:], "-inf") || !strings.HasPrefix(lines[3][col:], `"m"`) {
		t.Errorf("columns not aligned:\n%s", out)
	}
	code, out, _ = shoal(t, host, "admin", "nodes")
	if lines := strings.Split(strings.TrimSpace(out), "\n"); code != 0 || len(lines) != 3 || !strings.HasPrefix(lines[0], "ID") {
		t.Fatalf("admin nodes text: code %d\n%s", code, out)
	}
}

func TestAuthToken(t *testing.T) {
	cl, host := newCluster(t)
	cl.Token = "s3cret"
	code, _, errOut := shoal(t, host, "put", "k", "v")
	if code != 1 || !strings.Contains(errOut, "Error: unauthenticated") {
		t.Fatalf("without token: %d %q", code, errOut)
	}
	code, _, errOut = shoal(t, host, "--auth-token", "s3cret", "put", "k", "v")
	if code != 0 {
		t.Fatalf("with token: %d %q", code, errOut)
	}
}

// TestHelp checks that every client and admin command explains itself with an example.
func TestHelp(t *testing.T) {
	for _, c := range []*cobra.Command{rootCmd, putCmd, getCmd, delCmd, scanCmd, casCmd, adminCmd,
		adminNodesCmd, adminRangesCmd, adminSplitCmd, adminMergeCmd, adminTransferLeaderCmd} {
		if c.Short == "" || c.Long == "" || c.Example == "" {
			t.Errorf("%s: Short, Long and Example must all be set", c.CommandPath())
		}
	}
	code, out, _ := shoal(t, "scan", "--help")
	if code != 0 || !strings.Contains(out, "--limit") || !strings.Contains(out, "shoal scan user user~") {
		t.Errorf("scan --help: %d\n%s", code, out)
	}
}
