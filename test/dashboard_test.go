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
	"github.com/redis/go-redis/v9"

	"github.com/shoaldb/shoal/client"
	"github.com/shoaldb/shoal/pb"
	"github.com/shoaldb/shoal/server"
	"github.com/shoaldb/shoal/server/apijson"
)

// TestDashboard opens the dashboard of a real 3-node cluster (server.Run, as `shoal start` runs it, with
// RESP) in headless chromium and checks that what it shows matches the JSON API: charts that start with
// the nodes' history (/api/history) before the page's own polls, gRPC and RESP latency, every range with
// its replicas, leader and health as /api/ranges and /api/stats have them, three live nodes with their
// CPU and memory, one node's view, the decision log, no error banner and no script errors. Then it stops
// a node and checks the health view: every range under-replicated, none unavailable, on the page, in
// /api/stats and in the nodes' shoal_ranges_underreplicated gauges.
//
// Without a chromium binary the test is skipped, except in CI (CI=true), where it fails.
// SHOAL_CHROMIUM names the binary; SHOAL_DASHBOARD_SCREENSHOT, if set, is where the PNG of the page
// is copied (it is always written to the test's temporary directory), with the node's view and the
// health view beside it ("-node" and "-health" before the extension).
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

	// Traffic for the charts, over gRPC and RESP, from before the page opens (for the history) until
	// the end.
	resp := respClients(t, cl)
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
			switch i % 4 {
			case 0:
				cl.Put(c, k, []byte(strconv.Itoa(i)))
			case 1:
				cl.Get(c, k)
			case 2:
				resp[i%len(resp)].Set(c, "r"+string(k), i, 0)
			default:
				resp[i%len(resp)].Get(c, "r"+string(k))
			}
			cancel()
		}
	}()
	defer func() {
		close(stopLoad)
		loadWG.Wait()
	}()

	// Every node has kept a few points of history, with requests in them.
	base := "http://" + nodes[0].http
	var hist clusterHistory
	deadline := time.Now().Add(30 * time.Second)
	for {
		apiGet(t, base+"/api/history", "", &hist)
		if hist.ready(3) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no history of 3 points with gRPC and RESP requests on every node after 30s: %s", hist.summary())
		}
		time.Sleep(time.Second)
	}
	t.Logf("history ready after %v: %s", time.Since(testStart).Round(time.Millisecond), hist.summary())

	bctx, jsErrors := newBrowser(t, chrome, 60*time.Second)
	opened := time.Now()
	if err := chromedp.Run(bctx,
		chromedp.Navigate(base+"/"),
		chromedp.WaitVisible(`#ranges tbody tr[data-range-id]`, chromedp.ByQuery),
	); err != nil {
		t.Fatalf("open the dashboard: %v", err)
	}
	var ok bool
	poll := func(what, expr string) {
		t.Helper()
		if err := chromedp.Run(bctx, chromedp.Poll(expr, &ok, chromedp.WithPollingTimeout(15*time.Second))); err != nil {
			var banner, state string
			chromedp.Run(bctx, chromedp.Evaluate(`document.getElementById("error-banner").textContent`, &banner))
			chromedp.Run(bctx, chromedp.Evaluate(`JSON.stringify({history: document.getElementById("history-status").textContent,
				charts: [...document.querySelectorAll("svg.plot")].map(s => s.id + " " + s.dataset.points + "/" + s.dataset.historyPoints)})`, &state))
			t.Fatalf("waiting for %s: %v (error banner: %q; page: %s)", what, err, banner, state)
		}
	}

	// The charts start with the history: points from before the page opened, as many as the API had.
	poll("the history", `document.getElementById("history-status").dataset.loaded === "true"`)
	var shownHist struct {
		Points int   `json:"points"`
		From   int64 `json:"from"`
	}
	if err := chromedp.Run(bctx, chromedp.Evaluate(`({points: +document.getElementById("history-status").dataset.points,
		from: +document.getElementById("history-status").dataset.from})`, &shownHist)); err != nil {
		t.Fatal(err)
	}
	if shownHist.Points < hist.points() || shownHist.From > opened.UnixMilli()-5000 || shownHist.From != hist.from() {
		t.Errorf("the page loaded %d history points from %d; /api/history had %d from %d before it opened at %d",
			shownHist.Points, shownHist.From, hist.points(), hist.from(), opened.UnixMilli())
	}
	for _, id := range []string{"chart-throughput", "chart-latency", "chart-cpu", "chart-mem", "chart-disk", "chart-health"} {
		poll(id+" drawn from history", `+document.getElementById("`+id+`").dataset.historyPoints >= 2`)
	}
	poll("the throughput chart", `+document.getElementById("chart-throughput").dataset.points >= 4 &&
		document.querySelector("#chart-throughput path.series") !== null`)
	poll("gRPC and RESP latency", `document.querySelector('#chart-latency path[data-series="gRPC p99"]') !== null &&
		document.querySelector('#chart-latency path[data-series="RESP p99"]') !== null`)
	poll("CPU and memory of three nodes", `document.querySelectorAll("#chart-cpu path.series").length === 3 &&
		document.querySelectorAll("#chart-mem path.series").length === 3 &&
		[...document.querySelectorAll("#nodes tbody tr")].every(tr => tr.querySelector("[data-col=cpu]").textContent.endsWith("%") &&
			tr.querySelector("[data-col=mem]").textContent.endsWith("B") && tr.querySelector("[data-col=volume]").textContent.includes(" of "))`)

	// The range table matches /api/ranges (read again if a leadership or a decision changed in between).
	type shownRange struct {
		ID           uint64 `json:"id"`
		Leader       uint64 `json:"leader"`
		Replicas     string `json:"replicas"`
		Learners     string `json:"learners"`
		LeaderText   string `json:"leaderText"`
		ReplicasText string `json:"replicasText"`
		Health       string `json:"health"`
	}
	const readRanges = `[...document.querySelectorAll("#ranges tbody tr[data-range-id]")].map(tr => ({
		id: +tr.dataset.rangeId, leader: +tr.dataset.leader, replicas: tr.dataset.replicas, learners: tr.dataset.learners,
		leaderText: tr.querySelector("[data-col=leader]").textContent,
		replicasText: tr.querySelector("[data-col=replicas]").textContent, health: tr.dataset.health}))`
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
					LeaderText: strconv.FormatUint(a.Leader, 10), ReplicasText: joinIDs(a.Replicas, ", "), Health: "ok"}
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

	// Three live, active nodes, healthy ranges; the decision log as /api/decisions has it.
	poll("3 live active nodes", `document.querySelectorAll("#nodes tbody tr[data-live=true][data-admin=active]").length === 3`)
	poll("healthy ranges", `document.getElementById("health").dataset.underReplicated === "0" &&
		document.getElementById("health").dataset.unavailable === "0"`)
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
	checkDecisionLatency(t, cl, base, poll)

	poll("no error banner", `document.getElementById("error-banner").hidden`)
	screenshot(t, bctx, "")

	// One node's view: its figures, and its line alone in the per-node charts.
	clickNow(t, bctx, `#nodes tbody tr[data-node-id="2"] td[data-col=id]`)
	poll("node 2's view", `document.body.dataset.view === "2" && !document.getElementById("node-detail").hidden &&
		document.getElementById("node-detail").dataset.nodeId === "2" &&
		document.querySelector("#nd-figures [data-col=mem]").textContent.endsWith("B") &&
		document.querySelectorAll("#chart-cpu path.series").length === 1 &&
		document.querySelector('#chart-cpu path[data-series="n2"]') !== null &&
		+document.getElementById("chart-throughput").dataset.historyPoints >= 2`)
	screenshot(t, bctx, "-node")
	clickNow(t, bctx, `#nd-close`)
	poll("the cluster's view again", `document.body.dataset.view === "all" && document.getElementById("node-detail").hidden`)

	// The health view: with node 3 gone, every range lacks a voter; none lacks a quorum.
	n3 := nodes[2]
	n3.cancel()
	select {
	case err := <-n3.done:
		n3.done <- err // for the cluster's cleanup
	case <-time.After(30 * time.Second):
		t.Fatal("node 3 did not stop")
	}
	var api []apijson.RangeJSON
	apiGet(t, base+"/api/ranges", "", &api)
	want := strconv.Itoa(len(api))
	poll("every range under-replicated", `document.getElementById("health").dataset.underReplicated === "`+want+`" &&
		document.getElementById("health").dataset.unavailable === "0" &&
		document.querySelectorAll("#ranges tbody tr[data-health=under-replicated]").length === `+want+` &&
		document.querySelector('#nodes tbody tr[data-node-id="3"]').dataset.live === "false"`)
	var stats struct {
		Health struct {
			UnderReplicated []uint64 `json:"under_replicated"`
			Unavailable     []uint64 `json:"unavailable"`
		} `json:"health"`
	}
	apiGet(t, base+"/api/stats", "", &stats)
	if len(stats.Health.UnderReplicated) != len(api) || len(stats.Health.Unavailable) != 0 {
		t.Errorf("/api/stats health = %+v with %d ranges", stats.Health, len(api))
	}
	// Each range is counted by one of the two nodes left (its leader).
	deadline = time.Now().Add(15 * time.Second)
	for {
		sum := metricSum(t, "http://"+nodes[0].http, "shoal_ranges_underreplicated") + metricSum(t, "http://"+nodes[1].http, "shoal_ranges_underreplicated")
		if sum == float64(len(api)) {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("shoal_ranges_underreplicated sums to %v over the live nodes, want %d", sum, len(api))
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	poll("the health chart", `document.querySelector('#chart-health path[data-series="under-replicated"]') !== null`)
	screenshot(t, bctx, "-health")

	if errs := jsErrors(); len(errs) > 0 {
		t.Errorf("script errors on the page: %v", errs)
	}
	t.Logf("dashboard checked after %v", time.Since(testStart).Round(time.Millisecond))
}

// checkDecisionLatency drains the leader of k000's range under the test's load, finds the range's
// decision that has a p99 before and after in /api/decisions, and checks that the page shows both
// ("1.2 ms → 0.9 ms (−25%)", with p50 and the requests timed below).
func checkDecisionLatency(t *testing.T, cl *client.Client, base string, poll func(what, expr string)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	rangeID, _, activate := drainLeaderOf(t, ctx, cl, []byte("k000"))
	defer activate()
	type window struct {
		P99Ms *float64 `json:"p99_ms"`
	}
	var id uint64
	for deadline := time.Now().Add(45 * time.Second); id == 0; time.Sleep(time.Second) {
		if time.Now().After(deadline) {
			t.Fatalf("no decision on r%d with a p99 before and after in /api/decisions after 45s", rangeID)
		}
		var entries []struct {
			ID         uint64 `json:"id"`
			Range      uint64 `json:"range"`
			Throughput *struct {
				Before *window `json:"before"`
				After  *window `json:"after"`
			} `json:"throughput"`
		}
		apiGet(t, base+"/api/decisions", "", &entries)
		for _, e := range entries {
			if tp := e.Throughput; e.Range == rangeID && tp != nil && tp.Before != nil && tp.After != nil &&
				tp.Before.P99Ms != nil && tp.After.P99Ms != nil {
				id = e.ID
				t.Logf("decision %d on r%d: p99 %.3f ms → %.3f ms", id, rangeID, *tp.Before.P99Ms, *tp.After.P99Ms)
			}
		}
	}
	poll(fmt.Sprintf("decision %d's p99 before and after", id), `(() => {
		const td = document.querySelector('#decisions tr[data-decision-id="`+strconv.FormatUint(id, 10)+`"] td[data-col=p99]');
		return td !== null && /^[0-9.]+ (µs|ms|s) → [0-9.]+ (µs|ms|s)/.test(td.firstChild.textContent) &&
			td.querySelector(".detail").textContent.includes("requests timed");
	})()`)
}

// clusterHistory is the part of /api/history the test reads.
type clusterHistory struct {
	Nodes []struct {
		NodeID uint64 `json:"node_id"`
		Error  string `json:"error"`
		Points []struct {
			T    int64 `json:"t"`
			GRPC *struct {
				Count uint64 `json:"count"`
			} `json:"grpc"`
			RESP *struct {
				Count uint64 `json:"count"`
			} `json:"resp"`
		} `json:"points"`
	} `json:"nodes"`
}

// ready reports whether every node has n points and served gRPC and RESP requests in them.
func (h clusterHistory) ready(n int) bool {
	if len(h.Nodes) != 3 {
		return false
	}
	for _, nd := range h.Nodes {
		var g, r uint64
		for _, p := range nd.Points {
			if p.GRPC != nil {
				g += p.GRPC.Count
			}
			if p.RESP != nil {
				r += p.RESP.Count
			}
		}
		if len(nd.Points) < n || g == 0 || r == 0 {
			return false
		}
	}
	return true
}

func (h clusterHistory) points() int {
	n := 0
	for _, nd := range h.Nodes {
		n += len(nd.Points)
	}
	return n
}

// from is the time of the oldest point.
func (h clusterHistory) from() int64 {
	var t int64
	for _, nd := range h.Nodes {
		if len(nd.Points) > 0 && (t == 0 || nd.Points[0].T < t) {
			t = nd.Points[0].T
		}
	}
	return t
}

func (h clusterHistory) summary() string {
	var s []string
	for _, nd := range h.Nodes {
		s = append(s, fmt.Sprintf("node %d: %d points %s", nd.NodeID, len(nd.Points), nd.Error))
	}
	return strings.Join(s, "; ")
}

// respClients returns a RESP client of every node (closed at test end).
func respClients(t *testing.T, cl *client.Client) []*redis.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ns, err := cl.Nodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out []*redis.Client
	for _, n := range ns {
		if a := n.GetDesc().GetRespAddr(); a != "" {
			c := redis.NewClient(&redis.Options{Addr: a, Protocol: 2, MaxRetries: 3})
			t.Cleanup(func() { c.Close() })
			out = append(out, c)
		}
	}
	if len(out) == 0 {
		t.Fatal("no node serves RESP")
	}
	return out
}

// metricSum reads the node's /metrics and sums the series of name.
func metricSum(t *testing.T, base, name string) float64 {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	sum := 0.0
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, name); ok && (strings.HasPrefix(rest, " ") || strings.HasPrefix(rest, "{")) {
			f := strings.Fields(rest)
			v, err := strconv.ParseFloat(f[len(f)-1], 64)
			if err == nil {
				sum += v
			}
		}
	}
	return sum
}

// screenshot saves the page as a PNG in the test's directory and, with SHOAL_DASHBOARD_SCREENSHOT,
// beside that path with suffix before its extension.
func screenshot(t *testing.T, bctx context.Context, suffix string) {
	t.Helper()
	var png []byte
	if err := chromedp.Run(bctx, chromedp.FullScreenshot(&png, 100)); err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	shot := filepath.Join(t.TempDir(), "dashboard"+suffix+".png")
	if err := os.WriteFile(shot, png, 0o644); err != nil {
		t.Fatal(err)
	}
	if dst := os.Getenv("SHOAL_DASHBOARD_SCREENSHOT"); dst != "" {
		ext := filepath.Ext(dst)
		dst = strings.TrimSuffix(dst, ext) + suffix + ext
		if err := os.WriteFile(dst, png, 0o644); err != nil {
			t.Errorf("copy the screenshot: %v", err)
		}
		shot = dst
	}
	t.Logf("screenshot %s", shot)
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
	poll := func(what, expr string) {
		t.Helper()
		if err := chromedp.Run(bctx, chromedp.Poll(expr, &ok, chromedp.WithPollingTimeout(10*time.Second))); err != nil {
			t.Fatalf("waiting for %s: %v", what, err)
		}
	}
	// The history travels with the token too.
	poll("the history", `document.getElementById("history-status").dataset.loaded === "true"`)
	checkJobsTable(t, nodes[0].grpc, base, token, poll)
	screenshot(t, bctx, "-jobs")
	if errs := jsErrors(); len(errs) > 0 {
		t.Errorf("script errors on the page: %v", errs)
	}
}

// checkJobsTable checks the scan-jobs table: its empty state, then a job added through the client
// with its first run's outcome (due when added), as /api/jobs has it.
func checkJobsTable(t *testing.T, grpcAddr, base, token string, poll func(what, expr string)) {
	t.Helper()
	poll("the jobs' empty state", `(document.querySelector("#jobs tbody td.muted")?.textContent || "").startsWith("no scan jobs")`)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := client.New(ctx, client.Config{Addrs: []string{grpcAddr}, AuthToken: token})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	job := &pb.ScanJob{Name: "page-count", Start: []byte("page/"), End: []byte("page0"), EveryMs: 3600_000, DeadlineMs: 600_000, Count: true}
	if _, _, err := cl.AddJob(ctx, job); err != nil {
		t.Fatalf("AddJob: %v", err)
	}
	poll("the job's first run on the page", `document.querySelector('#jobs tr[data-job="page-count"]')?.dataset.outcome === "on time"`)
	var api []apijson.JobJSON
	apiGet(t, base+"/api/jobs", token, &api)
	if len(api) != 1 || api[0].Name != job.Name || api[0].Runs < 1 || api[0].Last[0].Outcome != "on time" {
		t.Errorf("/api/jobs = %+v", api)
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
		cfg := server.Config{Listen: "127.0.0.1:0", HTTP: "127.0.0.1:0", RESP: "127.0.0.1:0"}
		cfg.Node.DataDir, cfg.Node.AuthToken, cfg.Node.Storage.CacheBytes = filepath.Join(dir, fmt.Sprintf("n%d", i+1)), token, 16<<20
		cfg.Node.Autopilot.MeasureAfter = 4 * time.Second // decisions' windows after close sooner than the default 10 s
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

// clickNow clicks the element selector finds, found and clicked in one script: the page rebuilds
// its tables at every refresh, and chromedp's Click — find the node, then scroll to it, then press
// the mouse over it, each a call of its own — failed on a row replaced in between ("Could not find
// node with given id").
func clickNow(t *testing.T, bctx context.Context, selector string) {
	t.Helper()
	var found bool
	script := fmt.Sprintf(`(() => { const e = document.querySelector(%q); if (!e) return false; e.click(); return true; })()`, selector)
	if err := chromedp.Run(bctx, chromedp.Evaluate(script, &found)); err != nil {
		t.Fatalf("click %s: %v", selector, err)
	}
	if !found {
		t.Fatalf("click %s: no such element", selector)
	}
}
