package directory

import (
	"math"
	"testing"
	"time"

	"github.com/shoaldb/shoal/pb"
)

// The directory's view of a range's leader under reports that arrive late: a step is a heartbeat
// report (node, leading?, term) or a transfer this node made ("moved").
func TestDirectoryLeaderUnderLateReports(t *testing.T) {
	type step struct {
		moved  bool // movedLeader(r, node) instead of a report
		node   uint64
		leader bool
		term   uint64
	}
	const r = 7
	for _, tc := range []struct {
		name  string
		steps []step
		want  uint64
	}{
		{"a report", []step{{node: 2, leader: true, term: 5}}, 2},
		{"a newer term wins", []step{{node: 2, leader: true, term: 5}, {node: 3, leader: true, term: 6}}, 3},
		{"an older term loses", []step{{node: 3, leader: true, term: 6}, {node: 2, leader: true, term: 5}}, 3},
		{"the old leader's report sent before a transfer, delivered after it",
			[]step{{node: 2, leader: true, term: 5}, {moved: true, node: 4}, {node: 2, leader: true, term: 5}}, 4},
		{"the new leader's report after a transfer",
			[]step{{node: 2, leader: true, term: 5}, {moved: true, node: 4}, {node: 4, leader: true, term: 6}}, 4},
		{"the transferee's report from before it took over",
			[]step{{node: 2, leader: true, term: 5}, {moved: true, node: 4}, {node: 4, leader: false, term: 5}}, 4},
		{"an election after the transfer",
			[]step{{node: 2, leader: true, term: 5}, {moved: true, node: 4}, {node: 3, leader: true, term: 7}}, 3},
		{"the transferee lost it later",
			[]step{{node: 2, leader: true, term: 5}, {moved: true, node: 4}, {node: 4, leader: false, term: 8}}, 0},
		{"a leader that stepped down in its term", []step{{node: 2, leader: true, term: 5}, {node: 2, leader: false, term: 5}}, 0},
		{"a follower's report does not unset another leader", []step{{node: 2, leader: true, term: 5}, {node: 3, leader: false, term: 5}}, 2},
		{"reports without terms", []step{{node: 2, leader: true}, {node: 3, leader: true}, {node: 3, leader: false}}, 0},
	} {
		d := New()
		for _, s := range tc.steps {
			if s.moved {
				d.MovedLeader(r, s.node)
				continue
			}
			d.RecordStats(s.node, &pb.NodeStats{Ranges: []*pb.RangeLoad{{RangeId: r, Leader: s.leader, Term: s.term}}}, false, 0, nil)
		}
		if got := d.LeaderOf(r); got != tc.want {
			t.Errorf("%s: leader %d, want %d", tc.name, got, tc.want)
		}
	}
}

// The hit ratios a transfer's warmth check is measured against: the whole cache's (every lookup)
// and the node's own reads' (block bytes without streams and compactions), from successive
// heartbeats.
func TestDirectoryHitRatios(t *testing.T) {
	type report struct{ hits, misses, served, inCache uint64 }
	for _, tc := range []struct {
		name               string
		reports            []report
		wantCache, wantOwn float64 // -1: unknown
	}{
		{"one report", []report{{10, 10, 100, 90}}, -1, -1},
		{"a stream's misses count in the cache's ratio only",
			[]report{{0, 0, 0, 0}, {60, 40, 1000, 990}}, 0.6, 0.99},
		{"no own reads in between", []report{{0, 0, 500, 400}, {50, 50, 500, 400}}, 0.5, -1},
		{"a restart begins the counters again",
			[]report{{1000, 0, 9000, 9000}, {10, 10, 100, 50}, {20, 20, 200, 150}}, 0.5, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := New()
			for _, r := range tc.reports {
				d.RecordStats(2, &pb.NodeStats{BlockCacheHits: r.hits, BlockCacheMisses: r.misses,
					ServedBlockBytes: r.served, ServedBlockBytesInCache: r.inCache}, false, 0, nil)
			}
			for _, c := range []struct {
				what string
				f    func(uint64, time.Duration) (float64, bool)
				want float64
			}{{"cacheHitRatio", d.CacheHitRatio, tc.wantCache}, {"servedHitRatio", d.ServedHitRatio, tc.wantOwn}} {
				got, ok := c.f(2, time.Minute)
				if (c.want < 0) == ok || ok && math.Abs(got-c.want) > 1e-9 {
					t.Errorf("%s = %.3f, %v; want %.3f (-1: unknown)", c.what, got, ok, c.want)
				}
			}
		})
	}
}

// A status call's report computed before a heartbeat's but recorded after it has lower counters; it
// must not pass for a restart and clear the node's cache readings.
func TestDirectoryStatusReportKeepsReadings(t *testing.T) {
	d := New()
	d.RecordStats(1, &pb.NodeStats{BlockCacheHits: 10, ServedBlockBytes: 100, ServedBlockBytesInCache: 90}, false, 0, nil)
	d.RecordStats(1, &pb.NodeStats{BlockCacheHits: 30, ServedBlockBytes: 300, ServedBlockBytesInCache: 280}, false, 0, nil)
	d.ShowStats(1, &pb.NodeStats{BlockCacheHits: 20, ServedBlockBytes: 200, ServedBlockBytesInCache: 185,
		Ranges: []*pb.RangeLoad{{RangeId: 7, Leader: true, Term: 3}}}, false)
	if got, ok := d.ServedHitRatio(1, time.Minute); !ok || math.Abs(got-0.95) > 1e-9 {
		t.Errorf("servedHitRatio after a late status report = %.3f, %v; want 0.95 from the two heartbeats", got, ok)
	}
	if st, _ := d.StatsOf(1); st.GetServedBlockBytes() != 200 {
		t.Errorf("the status report did not replace the node's stats: %v", st)
	}
	if got := d.LeaderOf(7); got != 1 {
		t.Errorf("leader of range 7 after the status report = %d, want 1", got)
	}
}
