package deploy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/shoaldb/shoal/bench/ycsb"
	"github.com/shoaldb/shoal/server/apijson"
)

// TestRollingRestartCompose restarts every node of a 3-node compose cluster, one at a time, while a
// YCSB B load runs from the host: first through the hooks an orchestrator runs (shoal node prestop,
// a stop, a start, shoal node poststart), then with a plain kill of a node that leads a user range
// (given one by a leadership transfer 3 s before when it leads none). Through the hooks no request
// may fail; the figures (each restart's worst 1-s p99 against the steady state, and seconds below
// half the steady throughput after a kill) are logged, not asserted: they are wall-clock figures.
//
// It builds the image and starts real containers, so it runs only with SHOAL_DOCKER_TESTS=1:
//
//	SHOAL_DOCKER_TESTS=1 go test ./deploy -run TestRollingRestartCompose -v -timeout 20m
//
// SHOAL_ROLLING_REPORT=FILE writes the figures as JSON (rollingReport). SHOAL_ROLLING_IMAGE=NAME
// uses an image built beforehand (`make docker IMAGE=NAME`, which also leaves deploy/shoal, the
// host's client) instead of building one, so that a measured run spends no time building.
// SHOAL_ROLLING_LOGS=DIR keeps each node's log and each mode's autopilot decisions there.
// SHOAL_ROLLING_RATE=N paces the load at N operations a second (default rollingRate, 0: a closed
// loop, every thread as fast as the cluster answers). SHOAL_ROLLING_MODES picks the passes (default
// "hooks,kill"; rollingModes): "noop" runs no-op hooks (the docker exec without the drain), "+compose"
// stops and starts through docker-compose instead of the docker CLI, "+low" starts a node at a low CPU
// weight until it serves, "@N" paces that pass alone (hooks@1500). Each second's CPU (the host, each
// container, the load, the rest) and the test's own commands are logged beside the latency.
func TestRollingRestartCompose(t *testing.T) {
	if os.Getenv("SHOAL_DOCKER_TESTS") != "1" {
		t.Skip("builds an image and starts containers: set SHOAL_DOCKER_TESTS=1")
	}
	image := os.Getenv("SHOAL_ROLLING_IMAGE")
	if image == "" {
		image = "shoal:rolling-test"
		run(t, "make", "-C", "..", "docker", "IMAGE="+image)
	}
	rate := float64(rollingRate)
	if v := os.Getenv("SHOAL_ROLLING_RATE"); v != "" {
		r, err := strconv.ParseFloat(v, 64)
		if err != nil || r < 0 {
			t.Fatalf("SHOAL_ROLLING_RATE=%q: want operations a second, 0 for a closed loop", v)
		}
		rate = r
	}
	var report rollingReport
	if path := os.Getenv("SHOAL_ROLLING_REPORT"); path != "" {
		t.Cleanup(func() { writeReport(t, path, report) })
	}
	project := fmt.Sprintf("shoalroll%d", os.Getpid())
	env := []string{"SHOAL_IMAGE=" + image}
	var grpcs []string
	for i := 1; i <= 3; i++ {
		ports := freePorts(t, 3)
		env = append(env, fmt.Sprintf("SHOAL_NODE%d_GRPC=%d", i, ports[0]), fmt.Sprintf("SHOAL_NODE%d_HTTP=%d", i, ports[1]), fmt.Sprintf("SHOAL_NODE%d_RESP=%d", i, ports[2]))
		grpcs = append(grpcs, "127.0.0.1:"+strconv.Itoa(ports[0]))
	}
	// Compose v2 (the docker plugin) or v1 (docker-compose), as the Makefile picks.
	composeCmd := []string{"docker", "compose"}
	if exec.Command("docker", "compose", "version").Run() != nil {
		composeCmd = []string{"docker-compose"}
	}
	compose := func(args ...string) string {
		return runEnv(t, env, composeCmd[0], append(append(composeCmd[1:], "-p", project, "-f", "compose.yaml"), args...)...)
	}
	compose("up", "-d")
	logDir := os.Getenv("SHOAL_ROLLING_LOGS")
	t.Cleanup(func() {
		if logDir != "" {
			saveLogs(t, logDir, composeCmd, env, project)
		}
		down := exec.Command(composeCmd[0], append(composeCmd[1:], "-p", project, "-f", "compose.yaml", "down", "-v")...)
		down.Env = append(os.Environ(), env...)
		_ = down.Run()
	})
	bin, _ := filepath.Abs("shoal")
	waitFor(t, 2*time.Minute, "the cluster serves writes", func() bool {
		return exec.Command(bin, "--host", strings.Join(grpcs, ","), "put", "rolling-probe", "x").Run() == nil
	})
	ids := make([]string, 3)
	for i := range ids {
		// Resolved once, before the load: every later docker-compose call is a Python start on
		// the host's two cores, in the seconds being measured.
		ids[i] = strings.TrimSpace(compose("ps", "-q", fmt.Sprintf("node%d", i+1)))
	}
	h := &harness{t: t, compose: compose, ids: ids, grpcs: grpcs, bin: bin}
	for _, spec := range rollingModes(t) {
		t.Run(spec.name, func(t *testing.T) {
			h.t = t
			r := rate
			if spec.rate >= 0 {
				r = spec.rate
			}
			m := h.runMode(spec, r, logDir)
			report.Modes = append(report.Modes, m)
		})
	}
}

// runMode runs the load and restarts every node once in the way spec says; it returns the figures.
func (h *harness) runMode(spec rollMode, rate float64, logDir string) modeReport {
	t, bin, grpcs := h.t, h.bin, h.grpcs
	out := t.TempDir()
	tl := filepath.Join(out, "timeline.json")
	load := exec.Command(bin, "--format", "json", "bench", "ycsb", "--workload", "b", "--hosts", strings.Join(grpcs, ","),
		"--records", "2000", "--ops", "1000000000", "--threads", "8", "--rate", strconv.FormatFloat(rate, 'f', -1, 64),
		"--max-duration", "110s", "--timeline", tl)
	var stdout bytes.Buffer
	load.Stdout = &stdout
	if err := load.Start(); err != nil {
		t.Fatal(err)
	}
	stopSampling := sampleLeaders(bin, grpcs)
	stopCPU := sampleCPU(h.ids, load.Process.Pid)
	time.Sleep(30 * time.Second) // the load phase, then a steady run phase
	t.Logf("%s: leaders before the first restart: %s", spec.name, leaders(bin, grpcs))
	h.spans = nil
	var windows []window
	for i := 1; i <= 3; i++ {
		windows = append(windows, h.restart(spec, i))
	}
	err := load.Wait()
	samples, cpu := stopSampling(), stopCPU()
	if logDir != "" {
		if out, derr := exec.Command(bin, "--host", strings.Join(grpcs, ","), "--timeout", "10s", "--format", "json", "admin", "decisions").Output(); derr == nil {
			_ = os.WriteFile(filepath.Join(logDir, spec.name+"-decisions.json"), out, 0o644)
		}
	}
	if err != nil {
		t.Fatalf("load: %v\n%s", err, stdout.String())
	}
	var rep ycsb.Report
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatalf("load report: %v\n%s", err, stdout.String())
	}
	var points []ycsb.Point
	b, err := os.ReadFile(tl)
	if err == nil {
		err = json.Unmarshal(b, &points)
	}
	if err != nil {
		t.Fatalf("timeline: %v", err)
	}
	m, err := summarize(spec.name, rep, points, windows)
	if err != nil {
		t.Fatal(err)
	}
	m.Rate, m.Leaders, m.CPU, m.Commands = rate, samples, cpu, h.spans
	m.Quiet = quietSeconds(m, h.spans)
	h.logMode(m, rep)
	if spec.action == "hooks" && rep.Errors != 0 {
		t.Errorf("%d requests failed across the rolling restart through the hooks: %s", rep.Errors, rep.ErrorSample)
	}
	return m
}

// logMode logs a mode's figures: the steady state, each restart, the quiet seconds' noise, and
// every second of the restarts with its CPU and the commands that ran in it.
func (h *harness) logMode(m modeReport, rep ycsb.Report) {
	t := h.t
	t.Logf("%s (rate %.0f ops/s, 0: closed loop): steady %.0f ops/s, p99 %.2f ms; %d operations, %d failed (%s)", m.Mode, m.Rate, m.SteadyOps, m.SteadyP99Ms, m.Operations, m.Failed, rep.ErrorSample)
	for _, r := range m.Restarts {
		t.Logf("%s n%d: worst 1-s p99 %.2f ms = %.2fx steady (stopping %.2fx, starting %.2fx); %d s below half the steady throughput (longest run %d s); %d s over 1.5x steady (%s); events: %s",
			m.Mode, r.Node, r.WorstP99Ms, r.WorstP99Ratio, r.StoppingP99Ratio, r.StartingP99Ratio, r.SecondsBelowHalf, r.LongestBelowHalfS, len(r.Over), strings.Join(r.Over, ", "), strings.Join(r.Events, ", "))
	}
	q := m.Quiet
	t.Logf("%s noise: steady phase %d of %d s over 1.5x (worst %.2fx); quiet seconds after the first restart %d of %d over 1.5x (worst %.2fx)",
		m.Mode, q.SteadyOver, q.Steady, q.SteadyWorst, q.QuietOver, q.Quiet, q.QuietWorst)
	for _, line := range secondTable(m) {
		t.Log(line)
	}
}

// rollingRate is the load's default pace: 0, a closed loop (8 threads as fast as the cluster
// answers), as every figure in docs/design/cross-layer.md was measured. SHOAL_ROLLING_RATE paces it
// instead; at 5 000 operations a second (about half of the closed loop's throughput on a 2-core
// host) the restarts' worst seconds were as slow in milliseconds as in the closed loop, against a
// lower steady p99.
const rollingRate = 0

// window is one node's restart: from before its stop to 10 s after it serves again, in Unix seconds.
type window struct {
	node int
	// begin is when the restart's first command ran (a kill's leadership placement; else from).
	begin, from, to float64
	events          []string // "+1.2s stopped": what happened when, from the window's start
	// stopped is when the stop ended (from: prestop's start); start to started spans the start,
	// from before docker start to poststart's end (to the node serving again without hooks).
	stopped, start, started float64
}

// rollingReport is what SHOAL_ROLLING_REPORT receives: each mode's steady state and restarts.
type rollingReport struct {
	Modes []modeReport `json:"modes"`
}

type modeReport struct {
	Mode        string  `json:"mode"`       // "hooks" or "kill"
	Rate        float64 `json:"rate_ops_s"` // the load's pace; 0: a closed loop
	SteadyOps   float64 `json:"steady_ops_s"`
	SteadyP99Ms float64 `json:"steady_p99_ms"`
	Operations  int64   `json:"operations"`
	Failed      int64   `json:"failed"`
	// Restarts: one per node, in order.
	Restarts []restartReport `json:"restarts"`
	// Timeline is the load's 1-s points of the run phase.
	Timeline []ycsb.Point `json:"timeline"`
	// Leaders is which node led each range, polled every second through the run.
	Leaders []leaderSample `json:"leaders"`
	// CPU is what the host, each node, the load generator and the rest spent each second.
	CPU []cpuSample `json:"cpu"`
	// Commands are the test's commands against the cluster, when each ran.
	Commands []commandSpan `json:"commands"`
	Quiet    quietReport   `json:"quiet"`
}

// leaderSample is each range's leader at one moment (range id → node id; 0 unknown).
type leaderSample struct {
	Unix    float64           `json:"unix"`
	Leaders map[uint64]uint64 `json:"leaders"`
}

type restartReport struct {
	Node          int     `json:"node"`
	WorstP99Ms    float64 `json:"worst_p99_ms"`
	WorstP99Ratio float64 `json:"worst_p99_ratio"` // to the steady p99
	// SecondsBelowHalf counts the seconds of the restart under half the steady throughput, and
	// LongestBelowHalfS the longest run of them: the node's unavailability as the clients saw it.
	SecondsBelowHalf  int `json:"seconds_below_half"`
	LongestBelowHalfS int `json:"longest_below_half_s"`
	// StoppingP99Ratio is the worst p99 ratio of the seconds that overlap the stop (prestop to the
	// stop's end), StartingP99Ratio of those that overlap the start (docker start to poststart's end).
	StoppingP99Ratio float64  `json:"stopping_p99_ratio"`
	StartingP99Ratio float64  `json:"starting_p99_ratio"`
	Over             []string `json:"over_1_5x"` // "+7s 1.6x": the second ending 7 s in, its p99 ratio
	Events           []string `json:"events"`
}

// summarize judges each restart window of a mode against the steady state before the first.
func summarize(mode string, rep ycsb.Report, points []ycsb.Point, windows []window) (modeReport, error) {
	var steadyP99, steadyOps []float64
	m := modeReport{Mode: mode, Failed: rep.Errors, Operations: rep.Operations[ycsb.OpRead].Count + rep.Operations[ycsb.OpUpdate].Count}
	for _, p := range points {
		if p.Phase != "run" {
			continue
		}
		m.Timeline = append(m.Timeline, p)
		if p.Unix < windows[0].begin {
			steadyP99, steadyOps = append(steadyP99, p.P99Ms), append(steadyOps, p.Throughput)
		}
	}
	if len(steadyP99) < 5 {
		return m, fmt.Errorf("%d steady seconds before the first restart", len(steadyP99))
	}
	m.SteadyP99Ms, m.SteadyOps = median(steadyP99), median(steadyOps)
	for _, w := range windows {
		r := restartReport{Node: w.node, Events: w.events, Over: []string{}}
		run := 0
		for _, p := range m.Timeline {
			if p.Unix <= w.from || p.Unix > w.to {
				continue
			}
			r.WorstP99Ms = max(r.WorstP99Ms, p.P99Ms)
			if p.Throughput < m.SteadyOps/2 {
				r.SecondsBelowHalf++
				run++
				r.LongestBelowHalfS = max(r.LongestBelowHalfS, run)
			} else {
				run = 0
			}
			if p.P99Ms > 1.5*m.SteadyP99Ms {
				// The second ending at +x: where in the restart the p99 rose.
				r.Over = append(r.Over, fmt.Sprintf("+%.0fs %.1fx", p.Unix-w.from, p.P99Ms/m.SteadyP99Ms))
			}
		}
		r.WorstP99Ratio = r.WorstP99Ms / m.SteadyP99Ms
		r.StoppingP99Ratio = worstRatio(m.Timeline, w.from, w.stopped, m.SteadyP99Ms)
		r.StartingP99Ratio = worstRatio(m.Timeline, w.start, w.started, m.SteadyP99Ms)
		m.Restarts = append(m.Restarts, r)
	}
	return m, nil
}

// worstRatio is the worst p99 against steady among the 1-s points (each ending at its Unix) that
// overlap [from, to]; 0 when none does.
func worstRatio(timeline []ycsb.Point, from, to, steady float64) float64 {
	worst := 0.0
	for _, p := range timeline {
		if p.Unix > from && p.Unix-1 < to {
			worst = max(worst, p.P99Ms/steady)
		}
	}
	return worst
}

// leaders is how many ranges each node leads ("n1:4 n2:3 n3:0"), or why that is unknown: where
// the load stands after a restart.
func leaders(bin string, hosts []string) string {
	out, err := exec.Command(bin, "--host", strings.Join(hosts, ","), "--timeout", "5s", "--format", "json", "admin", "ranges").Output()
	var ranges []apijson.RangeJSON
	if err == nil {
		err = json.Unmarshal(out, &ranges)
	}
	if err != nil {
		return fmt.Sprintf("unknown (%v)", err)
	}
	led := map[uint64]int{}
	for _, r := range ranges {
		led[r.Leader]++
	}
	var parts []string
	for _, n := range slices.Sorted(maps.Keys(led)) {
		parts = append(parts, fmt.Sprintf("n%d:%d", n, led[n]))
	}
	return strings.Join(parts, " ")
}

// sampleLeaders polls each range's leader every second until the returned stop is called, which
// returns the samples: where the load stood at each second of the restarts.
func sampleLeaders(bin string, hosts []string) (stop func() []leaderSample) {
	return sampleEvery(func() (leaderSample, bool) {
		at := float64(time.Now().UnixMilli()) / 1000
		out, err := exec.Command(bin, "--host", strings.Join(hosts, ","), "--timeout", "2s", "--format", "json", "admin", "ranges").Output()
		var ranges []apijson.RangeJSON
		if err != nil || json.Unmarshal(out, &ranges) != nil {
			return leaderSample{}, false
		}
		s := leaderSample{Unix: at, Leaders: map[uint64]uint64{}}
		for _, r := range ranges {
			s.Leaders[r.ID] = r.Leader
		}
		return s, true
	})
}

// saveLogs writes each node's log to dir (node1.log …).
func saveLogs(t *testing.T, dir string, composeCmd, env []string, project string) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Logf("logs: %v", err)
		return
	}
	for i := 1; i <= 3; i++ {
		cmd := exec.Command(composeCmd[0], append(composeCmd[1:], "-p", project, "-f", "compose.yaml", "logs", "--no-color", "-t", fmt.Sprintf("node%d", i))...)
		cmd.Env = append(os.Environ(), env...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Logf("logs of node%d: %v", i, err)
		}
		_ = os.WriteFile(filepath.Join(dir, fmt.Sprintf("node%d.log", i)), out, 0o644)
	}
}

// writeReport writes the report as indented JSON.
func writeReport(t *testing.T, path string, r rollingReport) {
	b, err := json.MarshalIndent(r, "", "  ")
	if err == nil {
		err = os.WriteFile(path, b, 0o644)
	}
	if err != nil {
		t.Errorf("report: %v", err)
	}
}

func run(t *testing.T, name string, args ...string) string { return runEnv(t, nil, name, args...) }

func runEnv(t *testing.T, env []string, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// pickedPorts are the ports freePorts gave out, so that no two nodes get the same one.
var pickedPorts = map[int]bool{}

// freePorts picks n ports, free when picked, below Linux's ephemeral range (32768 and up): a port
// of that range can become the source port of an outgoing connection (a started node dialling a
// peer that is not up yet) before the node that is to listen on it starts, which kept node 3 from
// ever starting (address already in use) in one run.
func freePorts(t *testing.T, n int) []int {
	t.Helper()
	const lo, span = 20000, 12000
	var ports []int
	start := rand.IntN(span)
	for i := 0; i < span && len(ports) < n; i++ {
		p := lo + (start+i)%span
		if pickedPorts[p] {
			continue
		}
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		if err != nil {
			continue
		}
		l.Close()
		pickedPorts[p] = true
		ports = append(ports, p)
	}
	if len(ports) < n {
		t.Fatalf("found %d free ports in [%d, %d), want %d", len(ports), lo, lo+span, n)
	}
	return ports
}

func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(d); !cond(); time.Sleep(500 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("not within %v: %s", d, what)
		}
	}
}

func median(xs []float64) float64 {
	s := slices.Sorted(slices.Values(xs))
	return (s[(len(s)-1)/2] + s[len(s)/2]) / 2
}
