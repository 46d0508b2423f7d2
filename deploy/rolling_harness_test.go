package deploy

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/shoaldb/shoal/bench/ycsb"
	"github.com/shoaldb/shoal/server/apijson"
)

// rollMode is one pass of the rolling restart: how each node is stopped and started.
type rollMode struct {
	name string
	// action: "hooks" (shoal node prestop, a stop, a start, shoal node poststart), "noop" (the same
	// with both hooks replaced by `shoal version` in the container: the docker exec without the
	// drain; the stop's SIGTERM drains instead) or "kill" (docker kill, then a start).
	action string
	// viaCompose stops and starts the container through docker-compose (each call a Python
	// program on the host) instead of the docker CLI.
	viaCompose bool
	// lowStart starts the container with a CPU weight of lowShares, raised back to Docker's
	// default once the node serves: the peers keep the cores while it opens its store.
	lowStart bool
	// rate paces this pass's load (operations a second, 0: a closed loop); -1: SHOAL_ROLLING_RATE's.
	rate float64
}

// lowShares is a starting container's cgroup CPU weight (Docker's default is 1024).
const lowShares = 128

// rollingModes parses SHOAL_ROLLING_MODES ("hooks,kill" by default): a comma-separated list of
// actions (hooks, noop, kill), each with optional "+compose" and "+low" (rollMode) and "@N", the
// pass's own pace in operations a second (hooks@1500).
func rollingModes(t *testing.T) []rollMode {
	v := os.Getenv("SHOAL_ROLLING_MODES")
	if v == "" {
		v = "hooks,kill"
	}
	var modes []rollMode
	for _, name := range strings.Split(v, ",") {
		name = strings.TrimSpace(name)
		m := rollMode{name: name, rate: -1}
		if spec, pace, ok := strings.Cut(name, "@"); ok {
			r, err := strconv.ParseFloat(pace, 64)
			if err != nil || r < 0 {
				t.Fatalf("SHOAL_ROLLING_MODES: %q: want @operations a second", name)
			}
			name, m.rate = spec, r
		}
		parts := strings.Split(name, "+")
		m.action = parts[0]
		if !slices.Contains([]string{"hooks", "noop", "kill"}, m.action) {
			t.Fatalf("SHOAL_ROLLING_MODES: %q: want hooks, noop or kill, each with optional +compose, +low", name)
		}
		for _, opt := range parts[1:] {
			switch opt {
			case "compose":
				m.viaCompose = true
			case "low":
				m.lowStart = true
			default:
				t.Fatalf("SHOAL_ROLLING_MODES: %q: unknown option %q (compose, low)", name, opt)
			}
		}
		modes = append(modes, m)
	}
	return modes
}

// harness acts on the compose cluster's containers and records when each command ran.
type harness struct {
	t       *testing.T
	compose func(args ...string) string
	ids     []string // node1 … node3's container ids
	grpcs   []string // their gRPC addresses
	bin     string   // the host's shoal binary
	spans   []commandSpan
}

// commandSpan is one command the test ran against the cluster, in Unix seconds.
type commandSpan struct {
	What  string  `json:"what"`
	Begin float64 `json:"begin_unix"`
	End   float64 `json:"end_unix"`
}

func nowUnix() float64 { return float64(time.Now().UnixMilli()) / 1000 }

// do runs a command, recording its span, and returns its output; failing commands fail the test.
func (h *harness) do(what string, name string, args ...string) string {
	var out string
	h.span(what, func() { out = run(h.t, name, args...) })
	return out
}

// span runs f and records when it ran as the command what.
func (h *harness) span(what string, f func()) {
	b := nowUnix()
	f()
	e := nowUnix()
	h.spans = append(h.spans, commandSpan{What: what, Begin: b, End: e})
}

// restart stops and starts node i as spec says and returns the restart's window.
func (h *harness) restart(spec rollMode, i int) window {
	t, id, host := h.t, h.ids[i-1], h.grpcs[i-1]
	svc := fmt.Sprintf("node%d", i)
	begin := nowUnix()
	if spec.action == "kill" {
		h.leadUserRange(i)
	}
	from := nowUnix()
	var events []string
	mark := func(what string) { events = append(events, fmt.Sprintf("+%.1fs %s", nowUnix()-from, what)) }
	switch spec.action {
	case "hooks":
		t.Logf("n%d: %s", i, strings.TrimSpace(h.do("prestop", "docker", "exec", id, "/shoal", "node", "prestop", "--host", host, "--grace", "20s")))
		mark("prestop done")
	case "noop":
		h.do("prestop (no-op)", "docker", "exec", id, "/shoal", "version")
		mark("no-op prestop done")
	}
	switch {
	case spec.action == "kill":
		h.do("kill", "docker", "kill", id)
	case spec.viaCompose:
		h.span("compose stop", func() { h.compose("stop", svc) })
	default:
		h.do("stop", "docker", "stop", "-t", "30", id)
	}
	mark("stopped")
	stopped := nowUnix()
	time.Sleep(3 * time.Second)
	start := nowUnix()
	if spec.lowStart {
		h.do("cpu-shares low", "docker", "update", "--cpu-shares", fmt.Sprint(lowShares), id)
	}
	if spec.viaCompose {
		h.span("compose start", func() { h.compose("start", svc) })
	} else {
		h.do("start", "docker", "start", id)
	}
	mark("started")
	waitFor(t, time.Minute, "the node serves again", func() bool {
		return exec.Command(h.bin, "--host", host, "--timeout", "2s", "get", "rolling-probe").Run() == nil
	})
	mark("serves")
	started := nowUnix()
	if spec.lowStart {
		h.do("cpu-shares default", "docker", "update", "--cpu-shares", "1024", id)
	}
	switch spec.action {
	case "hooks":
		t.Logf("n%d: %s", i, strings.TrimSpace(h.do("poststart", "docker", "exec", id, "/shoal", "node", "poststart", "--host", host)))
		mark("poststart done")
		started = nowUnix()
	case "noop":
		h.do("poststart (no-op)", "docker", "exec", id, "/shoal", "version")
		started = nowUnix()
	}
	time.Sleep(10 * time.Second)
	mark("leaders " + leaders(h.bin, h.grpcs))
	return window{node: i, begin: begin, from: from, to: nowUnix(), events: events, stopped: stopped, start: start, started: started}
}

// leadUserRange makes node i the leader of a user range unless it leads one already, so that its
// kill takes a leadership with it: under a paced load the 2 000 records stay one range, and a
// killed node that led only the meta range (whose lookups the clients cache) cost the clients
// nothing. It waits 3 s after a transfer, so that the clients have followed the leadership.
func (h *harness) leadUserRange(i int) {
	t, hosts := h.t, strings.Join(h.grpcs, ",")
	var nodes []apijson.NodeJSON
	adminJSON(t, h.bin, hosts, &nodes, "nodes")
	at := slices.IndexFunc(nodes, func(n apijson.NodeJSON) bool { return n.Addr == h.grpcs[i-1] })
	if at < 0 {
		t.Fatalf("no node at %s among %+v", h.grpcs[i-1], nodes)
	}
	id := nodes[at].ID
	var ranges []apijson.RangeJSON
	adminJSON(t, h.bin, hosts, &ranges, "ranges")
	var pick uint64
	for _, r := range ranges {
		if r.Meta {
			continue
		}
		if r.Leader == id {
			t.Logf("n%d (node %d) leads r%d", i, id, r.ID)
			return
		}
		if pick == 0 && slices.Contains(r.Replicas, id) {
			pick = r.ID
		}
	}
	if pick == 0 {
		t.Fatalf("node %d holds no user range: %+v", id, ranges)
	}
	h.do("lead", h.bin, "--host", hosts, "--timeout", "10s", "admin", "transfer-leader", strconv.FormatUint(pick, 10), strconv.FormatUint(id, 10))
	t.Logf("n%d (node %d) given r%d's leadership", i, id, pick)
	time.Sleep(3 * time.Second)
}

// adminJSON runs `shoal admin WHAT` with JSON output into v; failing fails the test.
func adminJSON(t *testing.T, bin, hosts string, v any, what ...string) {
	t.Helper()
	out, err := exec.Command(bin, append([]string{"--host", hosts, "--timeout", "5s", "--format", "json", "admin"}, what...)...).Output()
	if err == nil {
		err = json.Unmarshal(out, v)
	}
	if err != nil {
		t.Fatalf("admin %s: %v", strings.Join(what, " "), err)
	}
}

// quietReport is how noisy the 1-s p99 is without a restart: the steady phase's seconds, and the
// seconds after the first restart that no command of the test touched (none ran from a second
// before to two seconds after it), each against 1.5x the steady p99.
type quietReport struct {
	Steady      int     `json:"steady_s"`
	SteadyOver  int     `json:"steady_over_1_5x"`
	SteadyWorst float64 `json:"steady_worst_ratio"`
	Quiet       int     `json:"quiet_s"`
	QuietOver   int     `json:"quiet_over_1_5x"`
	QuietWorst  float64 `json:"quiet_worst_ratio"`
}

func quietSeconds(m modeReport, spans []commandSpan) quietReport {
	var q quietReport
	if len(spans) == 0 || m.SteadyP99Ms == 0 {
		return q
	}
	first := spans[0].Begin
	for _, p := range m.Timeline {
		r := p.P99Ms / m.SteadyP99Ms
		if p.Unix < first {
			q.Steady++
			q.SteadyWorst = max(q.SteadyWorst, r)
			if r > 1.5 {
				q.SteadyOver++
			}
			continue
		}
		if slices.ContainsFunc(spans, func(s commandSpan) bool { return p.Unix-1 < s.End+2 && p.Unix > s.Begin-1 }) {
			continue
		}
		q.Quiet++
		q.QuietWorst = max(q.QuietWorst, r)
		if r > 1.5 {
			q.QuietOver++
		}
	}
	return q
}

// secondTable is one line per second from the first command on: throughput, p99 against the
// steady state, the CPU each part of the host spent, and the commands that ran in it.
func secondTable(m modeReport) []string {
	if len(m.Commands) == 0 {
		return nil
	}
	first := m.Commands[0].Begin
	lines := []string{fmt.Sprintf("%s per second: t(s) ops/s p99(ms) ratio | cores host n1 n2 n3 load other | commands", m.Mode)}
	for _, p := range m.Timeline {
		if p.Unix < first-2 {
			continue
		}
		cpu := "-"
		if i := slices.IndexFunc(m.CPU, func(c cpuSample) bool { return c.Unix > p.Unix-0.5 && c.Unix <= p.Unix+0.5 }); i >= 0 {
			c := m.CPU[i]
			cpu = fmt.Sprintf("%.2f %.2f %.2f %.2f %.2f %.2f", c.Host, c.Nodes[0], c.Nodes[1], c.Nodes[2], c.Load, c.Other)
		}
		var cmds []string
		for _, s := range m.Commands {
			if s.Begin < p.Unix && s.End > p.Unix-1 {
				cmds = append(cmds, fmt.Sprintf("%s [%.1f–%.1f]", s.What, s.Begin-first, s.End-first))
			}
		}
		lines = append(lines, fmt.Sprintf("%s %7.1f %6.0f %6.2f %5.2fx | %s | %s", m.Mode, p.Unix-first, p.Throughput, p.P99Ms, p.P99Ms/m.SteadyP99Ms, cpu, strings.Join(cmds, ", ")))
	}
	return lines
}

func TestRollingModesParse(t *testing.T) {
	t.Setenv("SHOAL_ROLLING_MODES", "noop, hooks+compose,hooks+low@1500,kill")
	got := rollingModes(t)
	want := []rollMode{
		{name: "noop", action: "noop", rate: -1},
		{name: "hooks+compose", action: "hooks", viaCompose: true, rate: -1},
		{name: "hooks+low@1500", action: "hooks", lowStart: true, rate: 1500},
		{name: "kill", action: "kill", rate: -1},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
}

func TestQuietSecondsSkipsCommands(t *testing.T) {
	m := modeReport{SteadyP99Ms: 2}
	for i, p99 := range []float64{2, 2, 4, 2, 9, 9, 2, 2, 2, 3.5, 2} {
		m.Timeline = append(m.Timeline, ycsb.Point{Unix: float64(100 + i), P99Ms: p99})
	}
	// Seconds 100-103 are steady (the first command begins at 103.5); 104-106 touch the command
	// (from a second before it to two after); 107-110 are quiet.
	q := quietSeconds(m, []commandSpan{{What: "stop", Begin: 103.5, End: 104}})
	want := quietReport{Steady: 4, SteadyOver: 1, SteadyWorst: 2, Quiet: 4, QuietOver: 1, QuietWorst: 1.75}
	if q != want {
		t.Fatalf("got %+v, want %+v", q, want)
	}
}

func TestWorstRatioOverlap(t *testing.T) {
	var tl []ycsb.Point
	for i, p99 := range []float64{2, 6, 3, 8, 2} {
		tl = append(tl, ycsb.Point{Unix: float64(101 + i), P99Ms: p99}) // the second (100+i, 101+i]
	}
	// [102.5, 103.2] overlaps the seconds ending at 103 and 104: 3 and 8 ms.
	if got := worstRatio(tl, 102.5, 103.2, 2); got != 4 {
		t.Fatalf("worst ratio = %v, want 4", got)
	}
	if got := worstRatio(tl, 200, 201, 2); got != 0 {
		t.Fatalf("worst ratio outside the timeline = %v, want 0", got)
	}
}

func TestCPUDeltaRestartedCounter(t *testing.T) {
	prev := cpuCounters{host: 10, nodes: []float64{5, 3}, load: 1}
	cur := cpuCounters{host: 11.5, nodes: []float64{5.5, 0.25}, load: 1.5}
	s := cpuDelta(prev, cur, 1, time.Unix(7, 0))
	if s.Host != 1.5 || s.Nodes[0] != 0.5 || s.Nodes[1] != 0.25 || s.Load != 0.5 || s.Other != 0.25 {
		t.Fatalf("%+v", s)
	}
}
