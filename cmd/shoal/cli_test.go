package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shoaldb/shoal/pb"
)

func TestVersion(t *testing.T) {
	code, out, _ := shoal(t, "version")
	if code != 0 || !strings.HasPrefix(out, "shoal ") || !strings.Contains(out, " go1.") {
		t.Fatalf("version: %d %q", code, out)
	}
	code, out2, _ := shoal(t, "--version")
	if code != 0 || out2 != out {
		t.Errorf("--version: %d %q; want %q", code, out2, out)
	}
	code, out, _ = shoal(t, "version", "--format", "json")
	var v map[string]string
	if err := json.Unmarshal([]byte(out), &v); err != nil || code != 0 || v["version"] == "" || !strings.HasPrefix(v["go"], "go") {
		t.Errorf("version json: %d %q: %v", code, out, err)
	}
}

func TestDidYouMean(t *testing.T) {
	for _, tc := range []struct {
		argv []string
		want string
	}{
		{[]string{"gett"}, "\tget\n"},
		{[]string{"admin", "nods"}, "\tnodes\n"},
		{[]string{"admin", "transfer"}, "\ttransfer-leader\n"},
		{[]string{"admin", "policy", "lst"}, "\tlist\n"},
	} {
		code, _, errOut := shoal(t, tc.argv...)
		if code != 2 || !strings.Contains(errOut, "Did you mean this?") || !strings.Contains(errOut, tc.want) {
			t.Errorf("shoal %q: %d %q; want a suggestion of %q", tc.argv, code, errOut, tc.want)
		}
	}
}

// TestAdminHelpListsEverySubcommand: admin's help text names each of its subcommands, so a new one is
// not forgotten there.
func TestAdminHelpListsEverySubcommand(t *testing.T) {
	for _, c := range adminCmd.Commands() {
		if !c.IsAvailableCommand() {
			continue
		}
		if !strings.Contains(adminCmd.Long, c.Name()) {
			t.Errorf("admin --help does not mention %q", c.Name())
		}
	}
}

// TestNodeCommandsHelpShowsOnlyTheirFlags: start and demo run nodes; the client flags (--host,
// --format, --timeout) do not apply to them and are left out of their help, and only theirs.
func TestNodeCommandsHelpShowsOnlyTheirFlags(t *testing.T) {
	for _, c := range []string{"start", "demo"} {
		code, out, _ := shoal(t, c, "--help")
		if code != 0 || strings.Contains(out, "--host") || strings.Contains(out, "--timeout") || strings.Contains(out, "Global Flags") ||
			!strings.Contains(out, "--data-dir") {
			t.Errorf("%s --help: %d\n%s", c, code, out)
		}
	}
	code, out, _ := shoal(t, "get", "--help")
	if code != 0 || !strings.Contains(out, "--host") || !strings.Contains(out, "--format") {
		t.Errorf("get --help lost the client flags: %d\n%s", code, out)
	}
	code, out, _ = shoal(t, "start", "--help")
	for _, f := range []string{"--read-hints on|off", "--admission on|off"} {
		line := ""
		for _, l := range strings.Split(out, "\n") {
			if strings.Contains(l, f) {
				line = l
			}
		}
		if code != 0 || !strings.HasSuffix(line, "(default on)") {
			t.Errorf("start --help: %q, want it to end with (default on)", line)
		}
	}
}

// TestFailFast: nothing listening, or an HTTP port given as --host, fails at once as unavailable,
// saying why. At once is well within half the command's default 10-s --timeout, which a command that
// retries would run into: a bound a host that stalls for seconds still keeps.
func TestFailFast(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().String()
	l.Close()
	web := httptest.NewServer(http.NotFoundHandler())
	defer web.Close()
	for _, tc := range []struct {
		host string
		want string
	}{
		{closed, "connection refused"},
		{strings.TrimPrefix(web.URL, "http://"), "--http port"},
	} {
		for _, argv := range [][]string{{"get", "k"}, {"put", "k", "v"}, {"admin", "nodes"}} {
			start := time.Now()
			code, out, errOut := shoal(t, append([]string{"--host", tc.host}, argv...)...)
			if took := time.Since(start); code != 1 || out != "" || took > 5*time.Second ||
				!strings.HasPrefix(errOut, "Error: unavailable: ") || !strings.Contains(errOut, tc.want) {
				t.Errorf("--host %s %q: exit %d after %v, stderr %q; want exit 1 at once, unavailable, %q", tc.host, argv, code, took, errOut, tc.want)
			}
		}
	}
}

// shoalIn runs the CLI with stdin.
func shoalIn(t *testing.T, stdin string, argv ...string) (int, string, string) {
	t.Helper()
	rootCmd.SetIn(strings.NewReader(stdin))
	defer rootCmd.SetIn(nil)
	return shoal(t, argv...)
}

func TestPutValueFromStdinOrFile(t *testing.T) {
	cl, host := newCluster(t)
	binary := "\x00\xffline\n"
	if code, _, errOut := shoalIn(t, binary, host, "put", "k1", "-"); code != 0 {
		t.Fatalf("put - : %d %q", code, errOut)
	}
	if v, _ := cl.Value("k1"); v != binary {
		t.Errorf("k1 = %q, want %q", v, binary)
	}
	f := filepath.Join(t.TempDir(), "v")
	os.WriteFile(f, []byte("from a file\n"), 0o644)
	if code, _, errOut := shoal(t, host, "put", "k2", "--value-file", f); code != 0 {
		t.Fatalf("put --value-file: %d %q", code, errOut)
	}
	if v, _ := cl.Value("k2"); v != "from a file\n" {
		t.Errorf("k2 = %q", v)
	}
	for _, tc := range []struct {
		argv []string
		want string
	}{
		{[]string{"put", "k"}, "VALUE missing"},
		{[]string{"put", "k", "v", "--value-file", f}, "not both"},
		{[]string{"put", "k", "--value-file", f + ".missing"}, "--value-file"},
	} {
		code, _, errOut := shoal(t, append([]string{host}, tc.argv...)...)
		if code != 2 || !strings.Contains(errOut, tc.want) {
			t.Errorf("shoal %q: %d %q; want 2 and %q", tc.argv, code, errOut, tc.want)
		}
	}
	// get prints the value byte for byte, so that it round-trips through a file.
	if code, out, _ := shoal(t, host, "get", "k1"); code != 0 || out != binary+"\n" {
		t.Errorf("get k1 = %d %q", code, out)
	}
}

func TestPrefix(t *testing.T) {
	cl, host := newCluster(t)
	for _, k := range []string{"user", "user/1", "user/2", "user0", "users"} {
		cl.Set(k, "v-"+k)
	}
	code, out, _ := shoal(t, host, "get", "--prefix", "user/")
	if code != 0 || out != "user/1\tv-user/1\nuser/2\tv-user/2\n" {
		t.Errorf("get --prefix user/: %d %q", code, out)
	}
	code, out, _ = shoal(t, host, "scan", "--prefix", "user", "--limit", "3", "--format", "json")
	var kvs []kvJSON
	if err := json.Unmarshal([]byte(out), &kvs); err != nil || code != 0 || len(kvs) != 3 || kvs[2].Key != "user/2" {
		t.Errorf("scan --prefix user --limit 3: %d %q: %v", code, out, err)
	}
	if code, out, _ := shoal(t, host, "get", "--prefix", "nobody/"); code != 0 || out != "" {
		t.Errorf("get --prefix with no key: %d %q; want 0 and nothing", code, out)
	}
	if code, _, errOut := shoal(t, host, "get", "--prefix", "--redis", "user:"); code != 2 || !strings.Contains(errOut, "do not go together") {
		t.Errorf("get --prefix --redis: %d %q", code, errOut)
	}
	for _, argv := range [][]string{{"scan", "--prefix", "a", "b"}, {"scan", "a"}} {
		if code, _, errOut := shoal(t, append([]string{host}, argv...)...); code != 2 || !strings.Contains(errOut, "PREFIX") {
			t.Errorf("shoal %q: %d %q", argv, code, errOut)
		}
	}
	for _, tc := range []struct{ prefix, end string }{
		{"a", "b"}, {"a\xff", "b"}, {"a\xfe", "a\xff"}, {"\xff\xff", ""}, {"", ""},
	} {
		if start, end := prefixSpan(tc.prefix); string(start) != tc.prefix || string(end) != tc.end {
			t.Errorf("prefixSpan(%q) = %q, %q; want end %q", tc.prefix, start, end, tc.end)
		}
	}
}

// TestKeyConvention: readable keys and values print as text; others as base64 with their encoding
// named in JSON, and quoted in text.
func TestKeyConvention(t *testing.T) {
	cl, host := newCluster(t)
	bin := "\xfe\x52\x00\x01k"
	cl.Set(bin, "\x00\x01")
	cl.Set("plain", "text")
	code, out, _ := shoal(t, host, "scan", "", "", "--format", "json")
	var kvs []map[string]string
	if err := json.Unmarshal([]byte(out), &kvs); err != nil || code != 0 || len(kvs) != 2 {
		t.Fatalf("scan json: %d %q: %v", code, out, err)
	}
	if p := kvs[0]; len(p) != 2 || p["key"] != "plain" || p["value"] != "text" {
		t.Errorf("readable pair = %v, want just key and value", p)
	}
	p := kvs[1]
	k, _ := base64.StdEncoding.DecodeString(p["key"])
	v, _ := base64.StdEncoding.DecodeString(p["value"])
	if p["key_encoding"] != "base64" || p["value_encoding"] != "base64" || string(k) != bin || string(v) != "\x00\x01" {
		t.Errorf("binary pair = %v", p)
	}
	code, out, _ = shoal(t, host, "scan", "", "")
	if want := "plain\ttext\n\"\\xfeR\\x00\\x01k\"\t\"\\x00\\x01\"\n"; code != 0 || out != want {
		t.Errorf("scan text = %q, want %q", out, want)
	}
	code, out, _ = shoal(t, host, "--format", "json", "get", bin)
	if code != 0 || !strings.Contains(out, `"key_encoding":"base64"`) || !strings.Contains(out, `"value":"AAE="`) {
		t.Errorf("get json = %d %q", code, out)
	}
}

// TestRangesJSONShape: the meta range is flagged, keys are also given readable, and an unknown leader
// is null, never node 0.
func TestRangesJSONShape(t *testing.T) {
	cl, host := newCluster(t)
	if _, _, err := cl.Split("m"); err != nil {
		t.Fatal(err)
	}
	code, out, _ := shoal(t, host, "--format", "json", "admin", "ranges")
	var ranges []map[string]any
	if err := json.Unmarshal([]byte(out), &ranges); err != nil || code != 0 || len(ranges) != 3 {
		t.Fatalf("admin ranges: %d %q: %v", code, out, err)
	}
	for i, r := range ranges {
		if meta := r["meta"] == true; meta != (r["id"] == float64(1)) || (meta && i != 0) {
			t.Errorf("range %v: meta flag wrong", r)
		}
	}
	if ranges[2]["start_key"] != "m" || ranges[2]["start"] != "6d" || ranges[1]["end_key"] != "m" {
		t.Errorf("keys: %v / %v", ranges[1], ranges[2])
	}
	if !strings.Contains(out, `"leader":1`) || strings.Contains(out, `"leader":0`) {
		t.Errorf("leaders: %s", out)
	}
}

// TestTransferLeaderRefusedAtOnce: a transfer that cannot be is refused before anything is asked of
// the cluster; at once is within half the command's default 10-s --timeout.
func TestTransferLeaderRefusedAtOnce(t *testing.T) {
	cl, host := newCluster(t)
	for _, tc := range []struct {
		argv []string
		want string
	}{
		{[]string{"admin", "transfer-leader", "99", "1"}, "range 99 does not exist"},
		{[]string{"admin", "transfer-leader", "2", "7"}, "node 7 holds no replica of range 2"},
	} {
		start := time.Now()
		code, _, errOut := shoal(t, append([]string{host}, tc.argv...)...)
		if took := time.Since(start); code != 1 || !strings.Contains(errOut, tc.want) || took > 5*time.Second {
			t.Errorf("shoal %q: %d after %v, %q; want 1 at once with %q", tc.argv, code, took, errOut, tc.want)
		}
	}
	if n := cl.Calls("TransferLeader"); n != 0 {
		t.Errorf("%d TransferLeader calls reached the cluster", n)
	}
}

// TestDrainWaitInAPipe: --wait's progress is plain lines when stderr is not a terminal, and the
// state is named as "admin nodes" names it.
func TestDrainWaitInAPipe(t *testing.T) {
	_, host := newCluster(t)
	code, out, errOut := shoal(t, host, "--format", "json", "admin", "drain", "1", "--wait")
	if code != 0 || out != `{"node":1,"state":"draining"}`+"\n" {
		t.Fatalf("drain --wait: %d %q %q", code, out, errOut)
	}
	if strings.ContainsAny(errOut, "\r#\033") || errOut != "node 1: 0/1 leaderships moved\nnode 1: 1/1 leaderships moved\n" {
		t.Errorf("progress in a pipe:\n%q", errOut)
	}
	code, out, _ = shoal(t, host, "--format", "json", "admin", "nodes")
	if code != 0 || !strings.Contains(out, `"state":"draining"`) {
		t.Errorf("admin nodes after drain: %s", out)
	}
	if code, _, errOut := shoal(t, host, "admin", "drain", "9"); code != 1 || !strings.Contains(errOut, "node 9 is not a member") {
		t.Errorf("drain of a stranger: %d %q", code, errOut)
	}
}

// TestDecommissionWithNowhereToGo: with every range on every node, a decommission cannot succeed;
// the command says why and changes nothing.
func TestDecommissionWithNowhereToGo(t *testing.T) {
	cl, host := newCluster(t)
	code, _, errOut := shoal(t, host, "admin", "decommission", "2", "--wait")
	if code != 1 || !strings.Contains(errOut, "node 2 cannot be decommissioned: its replicas have nowhere to go: range 1 already has replicas on nodes 1,2") ||
		!strings.Contains(errOut, "shoal admin drain 2") {
		t.Fatalf("decommission: %d %q", code, errOut)
	}
	if n := cl.Calls("SetNodeState"); n != 0 {
		t.Errorf("%d SetNodeState calls reached the cluster", n)
	}
	// A fourth node that holds no replica of the range can take them.
	nodes := []*pb.NodeStatus{}
	for id := uint64(1); id <= 4; id++ {
		nodes = append(nodes, &pb.NodeStatus{Desc: &pb.NodeDescriptor{NodeId: id}, Live: true, State: "live"})
	}
	reps := []*pb.ReplicaDescriptor{{NodeId: 1}, {NodeId: 2}, {NodeId: 3}, {NodeId: 4, Learner: true}}
	ranges := []*pb.RangeStatus{{Desc: &pb.RangeDescriptor{RangeId: 2, Replicas: reps}}}
	if err := decommissionBlocker(nodes, ranges, 3); err == nil {
		t.Error("node 4 holds a learner of the range: it cannot take a second replica")
	}
	ranges[0].Desc.Replicas = reps[:3]
	if err := decommissionBlocker(nodes, ranges, 3); err != nil {
		t.Errorf("node 4 is free: %v", err)
	}
	nodes[3].Live = false
	if err := decommissionBlocker(nodes, ranges, 3); err == nil {
		t.Error("node 4 is dead: it cannot take the replica")
	}
	if err := decommissionBlocker(nodes, ranges, 4); err != nil {
		t.Errorf("node 4 holds nothing: %v", err)
	}
}

// TestDecisionsText: the text table has the predicted and measured benefit, the throughput and the
// p99 latency before and after.
func TestDecisionsText(t *testing.T) {
	cl, host := newCluster(t)
	cl.SetDecisions(`[{"id":1,"time":"2026-11-29T01:00:00Z","policy":"rebalance","operator":"move r2 n1→n3","range":2,` +
		`"reason":"n1 has 4 more replicas","predicted":{"metric":"replicas.gap","from":1,"to":3,"before":4,"delta":-2},` +
		`"measured":{"metric":"replicas.gap","before":4,"after":2.5,"delta":-1.5},"status":"succeeded",` +
		`"throughput":{"span":"[a, b)","before":{"qps":120,"timed":1200,"p50_ms":1.5,"p99_ms":12.25},` +
		`"after":{"qps":240.4,"timed":2400,"p50_ms":1.2,"p99_ms":3.5}}},` +
		`{"id":2,"time":"2026-11-29T01:00:01Z","policy":"drain","operator":"transfer r2","range":2,"reason":"n1 drains",` +
		`"predicted":{"metric":"node.leaders","before":3,"delta":-1},"measured":null,"status":"running","throughput":null},` +
		`{"id":3,"time":"2026-11-29T01:00:02Z","policy":"load_split","operator":"split r3","range":3,"reason":"r3 is hot",` +
		`"predicted":{"metric":"span.max-qps","before":900,"delta":-450},"measured":null,"status":"succeeded",` +
		`"throughput":{"span":"[b, c)","before":{"qps":900,"timed":9000,"p50_ms":2,"p99_ms":40},"after":null}}]`)
	code, out, errOut := shoal(t, host, "admin", "decisions")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || len(lines) != 4 {
		t.Fatalf("decisions: %d %q %q", code, out, errOut)
	}
	for i, want := range [][]string{
		{"PREDICTED", "MEASURED", "QPS", "P99 MS", "REASON"},
		{"replicas.gap 4→2", "replicas.gap 4→2.5", "120→240", "12.25→3.50", "n1 has 4 more replicas"},
		{"node.leaders 3→2", "running", "n1 drains"},
		{"900→?", "40.00→?", "r3 is hot"},
	} {
		for _, w := range want {
			if !strings.Contains(lines[i], w) {
				t.Errorf("line %d %q lacks %q", i, lines[i], w)
			}
		}
	}
	if f := strings.Fields(lines[2]); !strings.Contains(lines[2], " -  ") || len(f) < 8 {
		t.Errorf("a decision not measured yet shows -: %q", lines[2])
	}
	code, out, _ = shoal(t, host, "admin", "decisions", "--format", "json")
	var ds []map[string]any
	if err := json.Unmarshal([]byte(out), &ds); err != nil || code != 0 || len(ds) != 3 {
		t.Errorf("decisions json: %d %q: %v", code, out, err)
	}
}

func TestProgressOnlyOnATerminal(t *testing.T) {
	var b bytes.Buffer
	p := newProgress(&b)
	for _, n := range []string{"1", "1", "2"} {
		p.show("[##..] "+n, "done "+n)
	}
	p.end()
	if b.String() != "done 1\ndone 2\n" {
		t.Errorf("in a pipe: %q", b.String())
	}
	p = &progress{w: &b, tty: true}
	b.Reset()
	p.show("[#...] 1", "done 1")
	p.show("[##..] 2", "done 2")
	p.end()
	if b.String() != "\r\033[K[#...] 1\r\033[K[##..] 2\n" {
		t.Errorf("on a terminal: %q", b.String())
	}
}

// A drain needs, for every range the node leads, a voter on another live, active node.
func TestDrainBlocker(t *testing.T) {
	node := func(id uint64, live, draining bool) *pb.NodeStatus {
		return &pb.NodeStatus{Desc: &pb.NodeDescriptor{NodeId: id}, Live: live, Draining: draining}
	}
	rng := func(id, leader uint64, reps ...*pb.ReplicaDescriptor) *pb.RangeStatus {
		return &pb.RangeStatus{Desc: &pb.RangeDescriptor{RangeId: id, Replicas: reps}, LeaderNodeId: leader}
	}
	voter := func(n uint64) *pb.ReplicaDescriptor { return &pb.ReplicaDescriptor{NodeId: n} }
	learner := func(n uint64) *pb.ReplicaDescriptor { return &pb.ReplicaDescriptor{NodeId: n, Learner: true} }
	three := []*pb.NodeStatus{node(1, true, false), node(2, true, false), node(3, true, false)}
	for _, tc := range []struct {
		name    string
		nodes   []*pb.NodeStatus
		ranges  []*pb.RangeStatus
		blocked bool
	}{
		{"single node", three[:1], []*pb.RangeStatus{rng(1, 1, voter(1))}, true},
		{"three voters", three, []*pb.RangeStatus{rng(1, 1, voter(1), voter(2), voter(3))}, false},
		{"peers dead", []*pb.NodeStatus{node(1, true, false), node(2, false, false), node(3, false, false)},
			[]*pb.RangeStatus{rng(1, 1, voter(1), voter(2), voter(3))}, true},
		{"the other voter drains", []*pb.NodeStatus{node(1, true, false), node(2, true, true), node(3, true, false)},
			[]*pb.RangeStatus{rng(1, 1, voter(1), voter(2), learner(3))}, true},
		{"a learner cannot lead", three, []*pb.RangeStatus{rng(1, 1, voter(1), learner(2))}, true},
		{"leads nothing", three[:1], []*pb.RangeStatus{rng(1, 2, voter(1), voter(2))}, false},
	} {
		err := drainBlocker(tc.nodes, tc.ranges, 1)
		if (err != nil) != tc.blocked {
			t.Errorf("%s: %v, want blocked %v", tc.name, err, tc.blocked)
		}
		if err != nil && !strings.Contains(err.Error(), "node 1 cannot be drained: range 1") {
			t.Errorf("%s: message %q", tc.name, err)
		}
	}
}

func TestPutTTLAndTTL(t *testing.T) {
	_, host := newCluster(t)
	if code, _, errOut := shoal(t, host, "put", "session", "tok", "--ttl", "60s"); code != 0 {
		t.Fatalf("put --ttl: %d %q", code, errOut)
	}
	if code, out, _ := shoal(t, host, "ttl", "session"); code != 0 || !strings.HasSuffix(out, "s\n") || out == "no expiry\n" {
		t.Errorf("ttl session = %d %q, want about 1m0s", code, out)
	}
	if code, out, _ := shoal(t, host, "--format", "json", "ttl", "session"); code != 0 || !strings.Contains(out, `"ttl_ms":`) || strings.Contains(out, `"ttl_ms":-1`) {
		t.Errorf("ttl --format json = %d %q", code, out)
	}
	shoal(t, host, "put", "plain", "v")
	if code, out, _ := shoal(t, host, "ttl", "plain"); code != 0 || out != "no expiry\n" {
		t.Errorf("ttl plain = %d %q, want no expiry", code, out)
	}
	shoal(t, host, "put", "brief", "v", "--ttl", "1ms")
	time.Sleep(5 * time.Millisecond)
	if code, _, errOut := shoal(t, host, "ttl", "brief"); code != 1 || errOut != "not found\n" {
		t.Errorf("ttl of an expired key = %d %q, want 1 and not found", code, errOut)
	}
	if code, _, errOut := shoal(t, host, "put", "k", "v", "--ttl", "100us"); code == 0 || !strings.Contains(errOut, "under 1ms") {
		t.Errorf("put --ttl 100us = %d %q, want an error", code, errOut)
	}
}
