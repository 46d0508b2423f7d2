package test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/shoaldb/shoal/client"
	"github.com/shoaldb/shoal/server"
	"github.com/shoaldb/shoal/server/apijson"
)

// TestDashboard opens the dashboard of a real 3-node cluster (server.Run, as `shoal start` runs it) in
// headless chromium and checks that what it shows matches the JSON API: every range with its replicas
// and leader as /api/ranges has them, three live nodes, charts that have drawn data, the decision log,
// no error banner and no script errors.
//
// Without a chromium binary the test is skipped, except in CI (CI=true), where it fails.
// SHOAL_CHROMIUM names the binary; SHOAL_DASHBOARD_SCREENSHOT, if set, is where the PNG of the page
// is copied (it is always written to the test's temporary directory).
func TestDashboard(t *testing.T) {
	chrome := findChromium(t)
	testStart := time.Now()

	nodes := startHTTPCluster(t, 3, "")
	cl, err := client.New(context.Background(), client.Config{Addrs: []string{nodes[0].grpc, nodes[1].grpc, nodes[2].grpc},
		RequestTimeout: 5 * time.Second, MaxAttempts: 40})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	waitReplicated(t, cl, 30*time.Second)

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for i := 0; i < 100; i++ {
		if err := cl.Put(ctx, []byte(fmt.Sprintf("k%03d", i)), []byte("v")); err != nil {
			t.Fatalf("put: %v", err)
		}
	}
	if err := splitAt(ctx, cl, []byte("k050")); err != nil {
		t.Fatal(err)
	}
	waitReplicated(t, cl, 20*time.Second)
	t.Logf("cluster up, split done after %v", time.Since(testStart).Round(time.Millisecond))

	// Traffic for the charts while the page is open.
	stopLoad := make(chan struct{})
	var loadWG sync.WaitGroup
	loadWG.Add(1)
	go func() {
		defer loadWG.Done()
		for i := 0; ; i++ {
			select {
			case <-stopLoad:
				return
			case <-time.After(5 * time.Millisecond):
			}
			c, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			k := []byte(fmt.Sprintf("k%03d", i%100))
			if i%2 == 0 {
				cl.Put(c, k, []byte(strconv.Itoa(i)))
			} else {
				cl.Get(c, k)
			}
			cancel()
		}
	}()
	defer func() {
		close(stopLoad)
		loadWG.Wait()
	}()

	bctx, jsErrors := newBrowser(t, chrome, 35*time.Second)
	base := "http://" + nodes[0].http
	if err := chromedp.Run(bctx,
		chromedp.Navigate(base+"/"),
		chromedp.WaitVisible(`#ranges tbody tr[data-range-id]`, chromedp.ByQuery),
	); err != nil {
		t.Fatalf("open the dashboard: %v", err)
	}

	// The range table matches /api/ranges (read again if a leadership or a decision changed in between).
	type shownRange struct {
		ID           uint64 `json:"id"`
		Leader       uint64 `json:"leader"`
		Replicas     string `json:"replicas"`
		Learners     string `json:"learners"`
		LeaderText   string `json:"leaderText"`
		ReplicasText string `json:"replicasText"`
	}
	const readRanges = `[...document.querySelectorAll("#ranges tbody tr[data-range-id]")].map(tr => ({
		id: +tr.dataset.rangeId, leader: +tr.dataset.leader, replicas: tr.dataset.replicas, learners: tr.dataset.learners,
		leaderText: tr.querySelector("[data-col=leader]").textContent,
		replicasText: tr.querySelector("[data-col=replicas]").textContent}))`
	var mismatch string
	for attempt := 0; attempt < 8; attempt++ {
		if attempt > 0 {
			time.Sleep(time.Second)
		}
		var shown []shownRange
		if err := chromedp.Run(bctx, chromedp.Evaluate(readRanges, &shown)); err != nil {
			t.Fatalf("read the range table: %v", err)
		}
		var api []apijson.RangeJSON
		apiGet(t, base+"/api/ranges", "", &api)
		mismatch = ""
		if len(api) < 3 {
			mismatch = fmt.Sprintf("/api/ranges has %d ranges, want at least 3 (meta and the two halves of the split)", len(api))
		} else if len(shown) != len(api) {
			mismatch = fmt.Sprintf("the page shows %d ranges, /api/ranges has %d", len(shown), len(api))
		} else {
			for i, a := range api {
				s := shown[i]
				want := shownRange{ID: a.ID, Leader: a.Leader, Replicas: joinIDs(a.Replicas, ","), Learners: joinIDs(a.Learners, ","),
					LeaderText: strconv.FormatUint(a.Leader, 10), ReplicasText: joinIDs(a.Replicas, ", ")}
				if a.Leader == 0 {
					want.LeaderText = "none"
				}
				if s != want {
					mismatch = fmt.Sprintf("row %d: page shows %+v, /api/ranges says %+v", i, s, want)
					break
				}
			}
		}
		if mismatch == "" {
			t.Logf("range table matches /api/ranges (%d ranges) on attempt %d", len(api), attempt+1)
			break
		}
		t.Logf("attempt %d: %s", attempt+1, mismatch)
	}
	if mismatch != "" {
		t.Fatalf("the range table does not match /api/ranges: %s", mismatch)
	}

	// Three live, active nodes; charts with data; the decision log as /api/decisions has it.
	var ok bool
	poll := func(what, expr string) {
		t.Helper()
		if err := chromedp.Run(bctx, chromedp.Poll(expr, &ok, chromedp.WithPollingTimeout(15*time.Second))); err != nil {
			var banner string
			chromedp.Run(bctx, chromedp.Evaluate(`document.getElementById("error-banner").textContent`, &banner))
			t.Fatalf("waiting for %s: %v (error banner: %q)", what, err, banner)
		}
	}
	poll("3 live active nodes", `document.querySelectorAll("#nodes tbody tr[data-live=true][data-admin=active]").length === 3`)
	poll("the throughput chart", `+document.getElementById("chart-throughput").dataset.points >= 2 &&
		document.querySelector("#chart-throughput path.series") !== null`)
	poll("the latency chart", `+document.getElementById("chart-latency").dataset.points >= 1`)
	var nodeIDs []string
	if err := chromedp.Run(bctx, chromedp.Evaluate(`[...document.querySelectorAll("#nodes tbody tr")].map(tr => tr.dataset.nodeId)`, &nodeIDs)); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(nodeIDs, []string{"1", "2", "3"}) {
		t.Errorf("node rows = %v, want 1, 2, 3", nodeIDs)
	}

	var decisionsOK bool
	for attempt := 0; attempt < 5 && !decisionsOK; attempt++ {
		if attempt > 0 {
			time.Sleep(time.Second)
		}
		var shownIDs []uint64
		if err := chromedp.Run(bctx, chromedp.Evaluate(`[...document.querySelectorAll("#decisions tbody tr[data-decision-id]")].map(tr => +tr.dataset.decisionId)`, &shownIDs)); err != nil {
			t.Fatal(err)
		}
		var entries []struct {
			ID uint64 `json:"id"`
		}
		apiGet(t, base+"/api/decisions", "", &entries)
		var apiIDs []uint64
		for _, e := range entries {
			apiIDs = append(apiIDs, e.ID)
		}
		slices.Sort(shownIDs)
		slices.Sort(apiIDs)
		decisionsOK = slices.Equal(shownIDs, apiIDs) || (len(apiIDs) > 200 && len(shownIDs) == 200)
		if !decisionsOK {
			t.Logf("attempt %d: page shows decisions %v, /api/decisions has %v", attempt+1, shownIDs, apiIDs)
		}
	}
	if !decisionsOK {
		t.Errorf("the decision list does not match /api/decisions")
	}

	poll("no error banner", `document.getElementById("error-banner").hidden`)

	var png []byte
	if err := chromedp.Run(bctx, chromedp.FullScreenshot(&png, 100)); err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	shot := filepath.Join(t.TempDir(), "dashboard.png")
	if err := os.WriteFile(shot, png, 0o644); err != nil {
		t.Fatal(err)
	}
	if dst := os.Getenv("SHOAL_DASHBOARD_SCREENSHOT"); dst != "" {
		if err := os.WriteFile(dst, png, 0o644); err != nil {
			t.Errorf("copy the screenshot: %v", err)
		}
	}
	if errs := jsErrors(); len(errs) > 0 {
		t.Errorf("script errors on the page: %v", errs)
	}
	t.Logf("dashboard checked after %v; screenshot %s", time.Since(testStart).Round(time.Millisecond), shot)
}

// TestDashboardToken checks the dashboard of a node that requires an auth token (a single node: the
// page's handling of the token is what is tested): without the token it asks for one; opened with
// ?token=T it keeps T for the session, drops it from the address bar and shows the cluster.
func TestDashboardToken(t *testing.T) {
	chrome := findChromium(t)
	const token = "dashboard-test-token"
	nodes := startHTTPCluster(t, 1, token)
	base := "http://" + nodes[0].http
	bctx, jsErrors := newBrowser(t, chrome, 30*time.Second)

	var banner string
	if err := chromedp.Run(bctx,
		chromedp.Navigate(base+"/"),
		chromedp.WaitVisible(`#auth`, chromedp.ByQuery),
		chromedp.WaitVisible(`#error-banner`, chromedp.ByQuery),
		chromedp.Text(`#error-banner`, &banner, chromedp.ByQuery),
	); err != nil {
		t.Fatalf("open the dashboard without a token: %v", err)
	}
	if !strings.Contains(banner, "auth token") || strings.Contains(banner, token) {
		t.Errorf("error banner without a token: %q", banner)
	}

	var loc string
	var rows []string
	if err := chromedp.Run(bctx,
		chromedp.Navigate(base+"/?token="+token),
		chromedp.WaitVisible(`#ranges tbody tr[data-range-id]`, chromedp.ByQuery),
		chromedp.Location(&loc),
		chromedp.Evaluate(`[...document.querySelectorAll("#ranges tbody tr[data-range-id]")].map(tr => tr.dataset.rangeId)`, &rows),
	); err != nil {
		t.Fatalf("open the dashboard with ?token=: %v", err)
	}
	if strings.Contains(loc, token) {
		t.Errorf("the token stays in the address bar: %s", loc)
	}
	var api []apijson.RangeJSON
	apiGet(t, base+"/api/ranges", token, &api)
	if len(rows) != len(api) || len(api) == 0 {
		t.Errorf("the page shows ranges %v, /api/ranges has %d", rows, len(api))
	}
	// The token lasts for the session: a reload without it still works.
	var ok bool
	if err := chromedp.Run(bctx,
		chromedp.Navigate(base+"/"),
		chromedp.WaitVisible(`#nodes tbody tr[data-node-id]`, chromedp.ByQuery),
		chromedp.Poll(`+document.getElementById("status").dataset.updated > 0 && document.getElementById("auth").hidden`, &ok,
			chromedp.WithPollingTimeout(10*time.Second)),
	); err != nil {
		t.Fatalf("reload without ?token=: %v", err)
	}
	if errs := jsErrors(); len(errs) > 0 {
		t.Errorf("script errors on the page: %v", errs)
	}
}

// newBrowser starts headless chromium for the test (stopped at test end) and returns a tab's context,
// bounded by timeout, and a function listing the uncaught script errors seen so far.
func newBrowser(t *testing.T, chrome string, timeout time.Duration) (context.Context, func() []string) {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chrome), chromedp.Headless, chromedp.NoSandbox,
		chromedp.DisableGPU, chromedp.Flag("disable-dev-shm-usage", true), chromedp.WindowSize(1400, 1000))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	bctx, cancelBrowser := chromedp.NewContext(actx)
	bctx, cancelTimeout := context.WithTimeout(bctx, timeout)
	// Cleanups run before the cluster's (registered earlier): the page stops polling first.
	t.Cleanup(func() {
		cancelTimeout()
		cancelBrowser()
		cancelAlloc()
	})
	var mu sync.Mutex
	var errs []string
	chromedp.ListenTarget(bctx, func(ev any) {
		if e, ok := ev.(*runtime.EventExceptionThrown); ok {
			mu.Lock()
			errs = append(errs, e.ExceptionDetails.Error())
			mu.Unlock()
		}
	})
	if err := chromedp.Run(bctx); err != nil { // start the browser now, so its failure is reported as such
		t.Fatalf("start %s: %v", chrome, err)
	}
	return bctx, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(errs)
	}
}

// findChromium returns the browser to drive: $SHOAL_CHROMIUM, or Debian's chromium on PATH. Without one
// the test is skipped, or fails under CI=true (where .ci/run installs it).
func findChromium(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("SHOAL_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("no chromium on PATH: the dashboard test needs it in CI (.ci/run installs Debian's chromium)")
	}
	t.Skip("no chromium on PATH (apt-get install chromium, or set SHOAL_CHROMIUM)")
	return ""
}

// httpNode is one server.Run node of startHTTPCluster.
type httpNode struct {
	grpc, http string
	cancel     context.CancelFunc
	done       chan error
}

// lockedBuffer collects a node's output from Run's goroutine.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

var nodeReadyLine = regexp.MustCompile(`(?m)^shoal node (\d+) ready grpc=(\S+) http=(\S+)$`)

// startHTTPCluster runs n nodes as `shoal start` does (server.Run: gRPC, HTTP with the dashboard) on
// loopback ports, the first bootstrapping and the rest joining it; they are stopped at test end.
func startHTTPCluster(t *testing.T, n int, token string) []*httpNode {
	t.Helper()
	dir := t.TempDir()
	var nodes []*httpNode
	t.Cleanup(func() {
		for _, nd := range nodes {
			nd.cancel()
		}
		for _, nd := range nodes {
			select {
			case err := <-nd.done:
				if err != nil {
					t.Errorf("node stopped with %v", err)
				}
			case <-time.After(30 * time.Second):
				t.Errorf("node did not stop within 30s")
			}
		}
	})
	for i := 0; i < n; i++ {
		cfg := server.Config{Listen: "127.0.0.1:0", HTTP: "127.0.0.1:0"}
		cfg.Node.DataDir, cfg.Node.AuthToken, cfg.Node.Storage.CacheBytes = filepath.Join(dir, fmt.Sprintf("n%d", i+1)), token, 16<<20
		if i == 0 {
			cfg.Node.Bootstrap = true
		} else {
			cfg.Node.Join = []string{nodes[0].grpc}
		}
		ctx, cancel := context.WithCancel(context.Background())
		nd := &httpNode{cancel: cancel, done: make(chan error, 1)}
		out := &lockedBuffer{}
		go func() { nd.done <- server.Run(ctx, cfg, out) }()
		deadline := time.Now().Add(30 * time.Second)
		for nd.grpc == "" {
			if m := nodeReadyLine.FindStringSubmatch(out.String()); m != nil {
				nd.grpc, nd.http = m[2], m[3]
				break
			}
			select {
			case err := <-nd.done:
				cancel()
				t.Fatalf("node %d exited before it was ready: %v (output %q)", i+1, err, out.String())
			case <-time.After(20 * time.Millisecond):
			}
			if time.Now().After(deadline) {
				cancel()
				t.Fatalf("node %d not ready after 30s (output %q)", i+1, out.String())
			}
		}
		nodes = append(nodes, nd)
	}
	return nodes
}

// waitReplicated waits until every range has 3 voters, no learners and a leader.
func waitReplicated(t *testing.T, cl *client.Client, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		rs, err := cl.Ranges(ctx)
		cancel()
		ok := err == nil && len(rs) > 0
		for _, r := range rs {
			voters := 0
			for _, rd := range r.GetDesc().GetReplicas() {
				if rd.GetLearner() {
					ok = false
				}
				voters++
			}
			if voters != 3 || r.GetLeaderNodeId() == 0 {
				ok = false
			}
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("ranges not fully replicated after %v (last error %v)", timeout, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// apiGet GETs url (with the token, if any) and decodes the JSON answer into v.
func apiGet(t *testing.T, url, token string, v any) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s = %s: %s", url, resp.Status, b)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("GET %s: %v in %s", url, err, b)
	}
}

func joinIDs(ids []uint64, sep string) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = strconv.FormatUint(id, 10)
	}
	return strings.Join(s, sep)
}
