// Package demo runs a local Shoal cluster of child processes (`shoal start`) on loopback for
// `shoal demo`: it picks and remembers ports, starts the nodes in order, loads sample data, prints
// each node's cluster id and addresses and stops every child when it ends (and, on Linux, the kernel
// stops them if the demo dies first). It never runs a node in its own process.
package demo

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/shoaldb/shoal/client"
	"github.com/shoaldb/shoal/pb"
	"github.com/shoaldb/shoal/server/resp"
	"github.com/shoaldb/shoal/storage"
)

// Bounds of `shoal demo`.
const (
	demoStateFile = "demo.json"
	demoLogFile   = "shoal.log"
	// MaxNodes is the most nodes a demo runs.
	MaxNodes           = 9
	demoHealthTimeout  = 60 * time.Second // per start-up phase, for every node's /healthz
	demoLiveTimeout    = 60 * time.Second // for the cluster to report every node live
	demoStopTimeout    = 10 * time.Second // after SIGTERM, before SIGKILL
	demoLogTailLines   = 20
	demoSampleWorkers  = 8
	demoSampleAttempts = 5
)

// demoState is DIR/demo.json: the addresses of every node the demo ever started, by node number - 1.
type demoState struct {
	Nodes []demoAddrs `json:"nodes"`
}

// demoAddrs are one demo node's listen addresses.
type demoAddrs struct {
	GRPC string `json:"grpc"`
	HTTP string `json:"http"`
	RESP string `json:"resp"`
}

// demoNode is one child process of the demo.
type demoNode struct {
	num      int    // 1-based: the node's place in the demo (its directory is n<num>)
	id       uint64 // the node's id in the cluster, once the cluster has reported it (0 before)
	dir      string
	addrs    demoAddrs
	hasStore bool // DIR/n<i> held a store before this run

	cmd  *exec.Cmd
	done chan struct{} // closed when the process has exited; err is set then
	err  error
}

func (n *demoNode) logPath() string { return filepath.Join(n.dir, demoLogFile) }

// String names the node in messages: by its cluster id once known (the id admin commands take), by
// its directory before.
func (n *demoNode) String() string {
	if n.id != 0 {
		return fmt.Sprintf("node %d", n.id)
	}
	return "node " + filepath.Base(n.dir)
}

func (n *demoNode) exited() bool {
	select {
	case <-n.done:
		return true
	default:
		return false
	}
}

// demo is one run of `shoal demo`.
type demo struct {
	dir    string
	exe    string
	nodes  []*demoNode
	stdout io.Writer
	stderr io.Writer
}

// Options say what cluster Run starts.
type Options struct {
	// Nodes is the number of nodes, 1..MaxNodes.
	Nodes int
	// DataDir holds the nodes' stores, logs and demo.json.
	DataDir string
	// Sample loads the sample data set.
	Sample bool
	// Stdout gets the summary; Stderr progress and the nodes' failures.
	Stdout, Stderr io.Writer
}

// Run starts the cluster, prints its summary and keeps it running until ctx ends, then stops every
// node. It returns nil when ctx ended it (an interrupted demo ends normally).
func Run(ctx context.Context, o Options) error {
	if o.Nodes < 1 || o.Nodes > MaxNodes {
		return fmt.Errorf("invalid --nodes %d: use 1..%d", o.Nodes, MaxNodes)
	}
	if o.DataDir == "" {
		return errors.New("--data-dir is empty")
	}
	d := &demo{stdout: o.Stdout, stderr: o.Stderr}
	if err := d.prepare(o.DataDir, o.Nodes); err != nil {
		return err
	}
	err := d.start(ctx, o.Sample)
	if err == nil && ctx.Err() == nil {
		d.printSummary(o.Sample)
		d.watch(ctx)
		<-ctx.Done()
	}
	d.stopAll()
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// prepare resolves the directory, the executable, the ports (reusing DIR/demo.json) and which nodes
// already hold a store, and records the ports.
func (d *demo) prepare(dataDir string, count int) error {
	var err error
	if d.dir, err = filepath.Abs(dataDir); err != nil {
		return err
	}
	if err := os.MkdirAll(d.dir, 0o755); err != nil {
		return fmt.Errorf("create demo directory: %w", err)
	}
	if d.exe, err = os.Executable(); err != nil {
		return fmt.Errorf("find the shoal executable to run nodes with: %w", err)
	}
	statePath := filepath.Join(d.dir, demoStateFile)
	state, err := loadDemoState(statePath)
	if err != nil {
		return err
	}
	for i := 1; i <= count; i++ {
		n := &demoNode{num: i, dir: filepath.Join(d.dir, fmt.Sprintf("n%d", i)), done: make(chan struct{})}
		if n.hasStore, err = hasStore(n.dir); err != nil {
			return fmt.Errorf("%s: %w", n, err)
		}
		if i <= len(state.Nodes) {
			n.addrs = state.Nodes[i-1]
		}
		d.nodes = append(d.nodes, n)
	}
	if !d.nodes[0].hasStore {
		for _, n := range d.nodes[1:] {
			if n.hasStore {
				return fmt.Errorf("%s holds no store but %s does: this demo cluster cannot be restarted; remove %s to start a fresh one", d.nodes[0].dir, n.dir, d.dir)
			}
		}
	}
	if err := d.assignPorts(statePath); err != nil {
		return err
	}
	for i, n := range d.nodes {
		if i < len(state.Nodes) {
			state.Nodes[i] = n.addrs
		} else {
			state.Nodes = append(state.Nodes, n.addrs)
		}
	}
	return saveDemoState(statePath, state)
}

// assignPorts keeps the recorded addresses of nodes with a store (they are part of the cluster's
// state: a busy one is an error) and picks free loopback ports for every other address.
func (d *demo) assignPorts(statePath string) error {
	need := 0
	for _, n := range d.nodes {
		for _, a := range []*string{&n.addrs.GRPC, &n.addrs.HTTP, &n.addrs.RESP} {
			switch {
			case *a == "":
			case !portFree(*a) && n.hasStore:
				return fmt.Errorf("address %s of %s (recorded in %s) is in use: stop whatever uses it (another demo?) or remove %s to start a fresh demo", *a, n, statePath, d.dir)
			case !portFree(*a):
				*a = ""
			}
			if *a == "" {
				need++
			}
		}
	}
	ports, err := pickFreeAddrs(need)
	if err != nil {
		return err
	}
	for _, n := range d.nodes {
		for _, a := range []*string{&n.addrs.GRPC, &n.addrs.HTTP, &n.addrs.RESP} {
			if *a == "" {
				*a, ports = ports[0], ports[1:]
			}
		}
	}
	return nil
}

// start runs the nodes in two phases — the nodes with a store (or node 1 of a new cluster, which
// bootstraps), then the nodes that join — waits for the cluster to report every node live and loads
// the sample data.
func (d *demo) start(ctx context.Context, sample bool) error {
	var first, joiners []*demoNode
	for _, n := range d.nodes {
		if n.hasStore || n.num == 1 {
			first = append(first, n)
		} else {
			joiners = append(joiners, n)
		}
	}
	var joinAddrs []string
	for _, n := range first {
		joinAddrs = append(joinAddrs, n.addrs.GRPC)
	}
	if d.nodes[0].hasStore {
		fmt.Fprintf(d.stderr, "Restarting the demo cluster in %s ...\n", d.dir)
	} else {
		fmt.Fprintf(d.stderr, "Starting a %d-node demo cluster in %s ...\n", len(d.nodes), d.dir)
	}
	for _, phase := range [][]*demoNode{first, joiners} {
		for _, n := range phase {
			var extra []string
			switch {
			case n.hasStore:
			case n.num == 1:
				extra = []string{"--bootstrap"}
			default:
				extra = []string{"--join", strings.Join(joinAddrs, ",")}
			}
			if err := d.spawn(n, extra); err != nil {
				return err
			}
		}
		if err := d.waitHealthy(ctx, phase); err != nil {
			return err
		}
	}

	c, err := client.New(ctx, client.Config{Addrs: d.grpcAddrs()})
	if err != nil {
		return err
	}
	defer c.Close()
	if err := d.waitLive(ctx, c); err != nil {
		return err
	}
	if sample && ctx.Err() == nil {
		d.loadSample(ctx, c)
	}
	return nil
}

// spawn starts node n as a child process running `start`, its output appended to its log file. The
// child gets its own process group and dies with the demo (childAttr).
func (d *demo) spawn(n *demoNode, extra []string) error {
	if err := os.MkdirAll(n.dir, 0o755); err != nil {
		return fmt.Errorf("%s: %w", n, err)
	}
	log, err := os.OpenFile(n.logPath(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("%s: open log: %w", n, err)
	}
	argv := append([]string{"start",
		"--data-dir", n.dir,
		"--listen", n.addrs.GRPC,
		"--http", n.addrs.HTTP,
		"--resp", n.addrs.RESP,
	}, extra...)
	fmt.Fprintf(log, "\n=== %s shoal demo: %s %s\n", time.Now().Format(time.RFC3339), d.exe, strings.Join(argv, " "))
	n.cmd = exec.Command(d.exe, argv...)
	n.cmd.Stdout, n.cmd.Stderr = log, log
	n.cmd.SysProcAttr = childAttr()
	if err := n.cmd.Start(); err != nil {
		log.Close()
		return fmt.Errorf("%s: start %s: %w", n, d.exe, err)
	}
	go func() {
		n.err = n.cmd.Wait()
		log.Close()
		close(n.done)
	}()
	return nil
}

// waitHealthy waits until every node of phase answers 200 on /healthz.
func (d *demo) waitHealthy(ctx context.Context, phase []*demoNode) error {
	deadline := time.Now().Add(demoHealthTimeout)
	hc := &http.Client{Timeout: 2 * time.Second}
	for _, n := range phase {
		url := "http://" + n.addrs.HTTP + "/healthz"
		for {
			if resp, err := hc.Get(url); err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					break
				}
			}
			if n.exited() {
				return fmt.Errorf("%s exited while starting (%v); last lines of %s:\n%s", n, n.err, n.logPath(), logTail(n.logPath(), demoLogTailLines))
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("%s did not become healthy within %s (%s); last lines of %s:\n%s", n, demoHealthTimeout, url, n.logPath(), logTail(n.logPath(), demoLogTailLines))
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(200 * time.Millisecond):
			}
		}
	}
	return nil
}

// waitLive waits until the cluster reports at least as many live nodes as the demo runs, and learns
// each demo node's cluster id from the report (by its gRPC address).
func (d *demo) waitLive(ctx context.Context, c *client.Client) error {
	deadline := time.Now().Add(demoLiveTimeout)
	last := "no answer yet"
	for {
		callCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
		nodes, err := c.Nodes(callCtx)
		cancel()
		if err == nil {
			live, states := 0, make([]string, 0, len(nodes))
			for _, n := range nodes {
				if n.GetLive() {
					live++
				}
				states = append(states, fmt.Sprintf("node %d %s", n.GetDesc().GetNodeId(), n.GetState()))
			}
			if live >= len(d.nodes) {
				return d.learnIDs(nodes)
			}
			last = fmt.Sprintf("%d of %d live: %s", live, len(d.nodes), strings.Join(states, ", "))
		} else {
			last = err.Error()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the cluster did not report %d live nodes within %s (%s); see the logs in %s", len(d.nodes), demoLiveTimeout, last, filepath.Join(d.dir, "n*", demoLogFile))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// learnIDs sets each demo node's cluster id from the cluster's node list. Node ids are given in the
// order nodes joined, which need not be the demo's order, so they are matched by address.
func (d *demo) learnIDs(nodes []*pb.NodeStatus) error {
	byAddr := make(map[string]uint64, len(nodes))
	for _, ns := range nodes {
		byAddr[ns.GetDesc().GetAddr()] = ns.GetDesc().GetNodeId()
	}
	for _, n := range d.nodes {
		if n.id = byAddr[n.addrs.GRPC]; n.id == 0 {
			return fmt.Errorf("the cluster lists no node at %s, the address of %s; see %s", n.addrs.GRPC, n, n.logPath())
		}
	}
	return nil
}

// loadSample writes the sample data set unless it is already there. A failure is reported but leaves
// the cluster running.
func (d *demo) loadSample(ctx context.Context, c *client.Client) {
	kvs := sampleData()
	if sampleLoaded(ctx, c, kvs) {
		fmt.Fprintf(d.stderr, "Sample data already loaded (%d keys).\n", len(kvs))
		return
	}
	start := time.Now()
	all := append(kvs, redisSample(kvs)...)
	work := make(chan [2]string)
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
		failed   int
	)
	for range demoSampleWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for kv := range work {
				if err := putWithRetry(ctx, c, kv[0], kv[1]); err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					failed++
					mu.Unlock()
				}
			}
		}()
	}
	for _, kv := range all {
		work <- kv
	}
	close(work)
	wg.Wait()
	if firstErr != nil {
		if ctx.Err() == nil {
			fmt.Fprintf(d.stderr, "Warning: %d of %d sample keys were not written (first error: %v); the cluster keeps running.\n", failed, len(all), firstErr)
		}
		return
	}
	fmt.Fprintf(d.stderr, "Loaded %d sample keys (user/0000..., city/...; the cities also as Redis strings) in %s.\n", len(kvs), time.Since(start).Round(time.Millisecond))
}

// putWithRetry writes one sample key. A Put is idempotent, so retrying one whose outcome is unknown
// (ErrAmbiguous, ErrTimeout) is safe here.
func putWithRetry(ctx context.Context, c *client.Client, k, v string) error {
	var err error
	for attempt := range demoSampleAttempts {
		callCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err = c.Put(callCtx, []byte(k), []byte(v))
		cancel()
		if err == nil || ctx.Err() != nil || errors.Is(err, client.ErrInvalidArgument) || errors.Is(err, client.ErrUnauthenticated) {
			return err
		}
		time.Sleep(time.Duration(attempt+1) * 200 * time.Millisecond)
	}
	return fmt.Errorf("put %s: %w", k, err)
}

// sampleLoaded reports whether the first and last key of each family of the sample already exist.
func sampleLoaded(ctx context.Context, c *client.Client, kvs [][2]string) bool {
	var probes []string
	prevFamily := ""
	for i, kv := range kvs {
		family, _, _ := strings.Cut(kv[0], "/")
		if family != prevFamily {
			probes = append(probes, kv[0])
			if i > 0 {
				probes = append(probes, kvs[i-1][0])
			}
			prevFamily = family
		}
	}
	probes = append(probes, kvs[len(kvs)-1][0])
	for _, k := range probes {
		callCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, found, err := c.Get(callCtx, []byte(k))
		cancel()
		if err != nil || !found {
			return false
		}
	}
	return true
}

var (
	sampleCities = []struct{ name, country string }{
		{"Amsterdam", "NL"}, {"Athens", "GR"}, {"Auckland", "NZ"}, {"Bangkok", "TH"}, {"Barcelona", "ES"},
		{"Berlin", "DE"}, {"Bogota", "CO"}, {"Boston", "US"}, {"Brussels", "BE"}, {"Buenos Aires", "AR"},
		{"Cairo", "EG"}, {"Cape Town", "ZA"}, {"Chicago", "US"}, {"Copenhagen", "DK"}, {"Dublin", "IE"},
		{"Edinburgh", "GB"}, {"Helsinki", "FI"}, {"Hong Kong", "HK"}, {"Istanbul", "TR"}, {"Jakarta", "ID"},
		{"Johannesburg", "ZA"}, {"Kyoto", "JP"}, {"Lagos", "NG"}, {"Lima", "PE"}, {"Lisbon", "PT"},
		{"London", "GB"}, {"Los Angeles", "US"}, {"Madrid", "ES"}, {"Melbourne", "AU"}, {"Mexico City", "MX"},
		{"Montreal", "CA"}, {"Mumbai", "IN"}, {"Nairobi", "KE"}, {"Oslo", "NO"}, {"Paris", "FR"},
		{"Prague", "CZ"}, {"Reykjavik", "IS"}, {"Rome", "IT"}, {"San Francisco", "US"}, {"Santiago", "CL"},
		{"Sao Paulo", "BR"}, {"Seoul", "KR"}, {"Singapore", "SG"}, {"Stockholm", "SE"}, {"Sydney", "AU"},
		{"Taipei", "TW"}, {"Tokyo", "JP"}, {"Toronto", "CA"}, {"Vienna", "AT"}, {"Warsaw", "PL"},
	}
	sampleFirstNames = []string{"Ada", "Alan", "Barbara", "Donald", "Edsger", "Frances", "Grace", "John", "Ken",
		"Leslie", "Margaret", "Niklaus", "Radia", "Shafi", "Tony", "Barbara", "Dennis", "Jim", "Butler", "Robin"}
	sampleLastNames = []string{"Lovelace", "Turing", "Liskov", "Knuth", "Dijkstra", "Allen", "Hopper", "McCarthy",
		"Thompson", "Lamport", "Hamilton", "Wirth", "Perlman", "Goldwasser", "Hoare", "Gray", "Lampson", "Milner"}
)

// redisSample is the sample's cities again as Redis strings (stored where the RESP listener keeps
// them), so that redis-cli reads them too.
func redisSample(kvs [][2]string) [][2]string {
	var out [][2]string
	for _, kv := range kvs {
		if strings.HasPrefix(kv[0], "city/") {
			out = append(out, [2]string{string(resp.KeyFor([]byte(kv[0]))), kv[1]})
		}
	}
	return out
}

// sampleData is the demo's data set: 950 users and 50 cities, 1000 keys in key order, JSON values.
func sampleData() [][2]string {
	var kvs [][2]string
	for _, c := range sampleCities {
		slug := strings.ToLower(strings.ReplaceAll(c.name, " ", "-"))
		v, _ := json.Marshal(map[string]string{"name": c.name, "country": c.country})
		kvs = append(kvs, [2]string{"city/" + slug, string(v)})
	}
	for i := range 1000 - len(sampleCities) {
		city := sampleCities[(i*7)%len(sampleCities)]
		v, _ := json.Marshal(map[string]any{
			"name": sampleFirstNames[i%len(sampleFirstNames)] + " " + sampleLastNames[(i/len(sampleFirstNames)+i)%len(sampleLastNames)],
			"city": strings.ToLower(strings.ReplaceAll(city.name, " ", "-")),
			"age":  18 + (i*37)%60,
		})
		kvs = append(kvs, [2]string{fmt.Sprintf("user/%04d", i), string(v)})
	}
	return kvs
}

// printSummary prints the contract lines: one per node, the dashboard and a command to try.
func (d *demo) printSummary(sample bool) {
	for _, n := range d.nodes {
		fmt.Fprintf(d.stdout, "node %d  grpc=%s  http=http://%s  data=%s\n", n.id, n.addrs.GRPC, n.addrs.HTTP, n.dir)
	}
	fmt.Fprintf(d.stdout, "Dashboard: http://%s/\n", d.nodes[0].addrs.HTTP)
	if a := d.nodes[0].addrs.RESP; a != "" {
		var resp []string
		for _, n := range d.nodes {
			resp = append(resp, n.addrs.RESP)
		}
		host, port, _ := net.SplitHostPort(a)
		fmt.Fprintf(d.stdout, "Redis (RESP): redis-cli -c -h %s -p %s   (nodes: %s)\n", host, port, strings.Join(resp, " "))
	}
	if sample {
		fmt.Fprintf(d.stdout, "Try: shoal --host %s get user/0001\n", d.nodes[0].addrs.GRPC)
		if a := d.nodes[0].addrs.RESP; a != "" {
			host, port, _ := net.SplitHostPort(a)
			fmt.Fprintf(d.stdout, "     redis-cli -c -h %s -p %s get city/lisbon   (or: shoal get --redis city/lisbon)\n", host, port)
		}
	} else {
		fmt.Fprintf(d.stdout, "Try: shoal --host %s put hello world\n", d.nodes[0].addrs.GRPC)
	}
	fmt.Fprintf(d.stderr, "Logs: %s. Press Ctrl-C to stop the cluster.\n", filepath.Join(d.dir, "n*", demoLogFile))
}

// watch reports nodes that exit while the demo runs (the others keep running: a demo may well be
// about killing a node).
func (d *demo) watch(ctx context.Context) {
	for _, n := range d.nodes {
		go func() {
			select {
			case <-n.done:
				if ctx.Err() == nil {
					fmt.Fprintf(d.stderr, "%s exited (%v); see %s\n", n, n.err, n.logPath())
				}
			case <-ctx.Done():
			}
		}()
	}
}

// stopAll sends SIGTERM to every running node, waits up to demoStopTimeout, then SIGKILLs the rest.
func (d *demo) stopAll() {
	var running []*demoNode
	for _, n := range d.nodes {
		if n.cmd != nil && !n.exited() {
			running = append(running, n)
		}
	}
	if len(running) == 0 {
		return
	}
	fmt.Fprintf(d.stderr, "Stopping %d node(s) ...\n", len(running))
	for _, n := range running {
		_ = n.cmd.Process.Signal(syscall.SIGTERM)
	}
	deadline := time.NewTimer(demoStopTimeout)
	defer deadline.Stop()
	expired := false
	for _, n := range running {
		if !expired {
			select {
			case <-n.done:
				continue
			case <-deadline.C:
				expired = true
			}
		}
		if !n.exited() {
			fmt.Fprintf(d.stderr, "%s did not stop within %s: killing it\n", n, demoStopTimeout)
			_ = n.cmd.Process.Kill()
			<-n.done
		}
	}
	fmt.Fprintln(d.stderr, "Stopped.")
}

func (d *demo) grpcAddrs() []string {
	addrs := make([]string, len(d.nodes))
	for i, n := range d.nodes {
		addrs[i] = n.addrs.GRPC
	}
	return addrs
}

// hasStore reports whether dir holds a Shoal store, by opening it. A directory that is missing, empty
// or holds only a demo log has none; one that cannot be opened (in use, corrupt) is an error.
func hasStore(dir string) (bool, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	empty := true
	for _, e := range entries {
		if e.Name() != demoLogFile {
			empty = false
		}
	}
	if empty {
		return false, nil
	}
	e, err := storage.Open(dir, storage.Options{CacheBytes: 1 << 20})
	if errors.Is(err, storage.ErrNoStore) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return true, e.Close()
}

func loadDemoState(path string) (demoState, error) {
	var s demoState
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return s, nil
	}
	if err != nil {
		return s, err
	}
	if err := json.Unmarshal(b, &s); err != nil {
		return s, fmt.Errorf("%s is not valid JSON (%v): fix or remove it", path, err)
	}
	return s, nil
}

func saveDemoState(path string, s demoState) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("record demo ports: %w", err)
	}
	return os.Rename(tmp, path)
}

// pickFreeAddrs returns n distinct free loopback addresses. It holds every listener until all are
// picked, so that the same port is not returned twice.
func pickFreeAddrs(n int) ([]string, error) {
	addrs := make([]string, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("pick a free port: %w", err)
		}
		defer l.Close()
		addrs = append(addrs, l.Addr().String())
	}
	return addrs, nil
}

// portFree reports whether addr can be listened on now.
func portFree(addr string) bool {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return false
	}
	l.Close()
	return true
}

// logTail returns the last n lines of the file at path (or why it cannot).
func logTail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", path, err)
	}
	lines := bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return "  " + string(bytes.Join(lines, []byte("\n  ")))
}
