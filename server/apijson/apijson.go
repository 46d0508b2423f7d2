// Package apijson owns the JSON shapes of the admin views that users and scripts read: the node list,
// the range list and the scan jobs. The HTTP API (/api/nodes, /api/ranges, /api/jobs) and the CLI
// (`shoal admin nodes|ranges --format json`) both emit them through this package, so the two can never
// drift apart (DESIGN.md §5).
//
// It only converts wire types; it must never fetch anything itself.
package apijson

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"sort"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/shoaldb/shoal/pb"
)

// NodeJSON is one node as shown by /api/nodes and `shoal admin nodes --format json`.
type NodeJSON struct {
	ID       uint64 `json:"id"`
	Addr     string `json:"addr"`
	HTTPAddr string `json:"http_addr"`
	Locality string `json:"locality,omitempty"`
	// Profile is the engine profile the node runs (read, write, readwrite, scan, default; absent
	// before its first heartbeat).
	Profile     string `json:"profile,omitempty"`
	Live        bool   `json:"live"`
	Draining    bool   `json:"draining"`
	State       string `json:"state"`
	RangeCount  uint32 `json:"range_count"`
	LeaderCount uint32 `json:"leader_count"`
	// Tasks are the node's pending and running background tasks, e.g. "backup running (heavy)".
	Tasks []string `json:"tasks"`
	// Join is the node's join into a running cluster (absent for nodes that never joined one).
	Join *JoinJSON `json:"join,omitempty"`
	// Usage is the node's usage (CPU share plus disk busy; 1: saturated) as measured and as the
	// usage model predicts it from its ranges, and its cache's hit ratio, predicted and observed on
	// the point reads it measured (absent before its first heartbeat, or without measured reads).
	Usage *UsageJSON `json:"usage,omitempty"`
}

// UsageJSON is a node's measured and predicted usage and hit ratio (docs/design/usage.md).
type UsageJSON struct {
	Measured     float64  `json:"measured"`
	Predicted    float64  `json:"predicted"`
	PredictedHit float64  `json:"predicted_hit_ratio"`
	ObservedHit  *float64 `json:"observed_hit_ratio,omitempty"`
}

// usageJSON is st's usage (nil when st reports neither CPU nor cache).
func usageJSON(st *pb.NodeStats) *UsageJSON {
	if st.GetCpuCores() == 0 && st.GetBlockBytes() == 0 {
		return nil
	}
	u := &UsageJSON{Measured: st.GetDiskBusy(), Predicted: st.GetPredictedUsage(), PredictedHit: st.GetPredictedHitRatio()}
	if st.GetCpuCores() > 0 {
		u.Measured += st.GetCpuPercent() / 100 / st.GetCpuCores()
	}
	var reads, hits uint64
	for _, rl := range st.GetRanges() {
		reads += rl.GetMeasuredReads()
		hits += rl.GetMeasuredReadHits()
	}
	if reads > 0 {
		h := float64(hits) / float64(reads)
		u.ObservedHit = &h
	}
	return u
}

// JoinJSON is a node's join: strategy, replicas to receive (target) and held, ranges led, and the
// times it started, first served a range and finished (RFC 3339; empty while not reached).
type JoinJSON struct {
	Strategy    string `json:"strategy"`
	Target      uint32 `json:"target"`
	Held        uint32 `json:"held"`
	Leading     uint32 `json:"leading"`
	Started     string `json:"started"`
	FirstServed string `json:"first_served"`
	Done        string `json:"done"`
}

func unixText(ns int64) string {
	if ns == 0 {
		return ""
	}
	return time.Unix(0, ns).UTC().Format(time.RFC3339Nano)
}

// JoinStatusJSON converts a join status (nil stays nil).
func JoinStatusJSON(j *pb.JoinStatus) *JoinJSON {
	if j == nil {
		return nil
	}
	return &JoinJSON{Strategy: j.Strategy, Target: j.Target, Held: j.Held, Leading: j.Leading,
		Started: unixText(j.StartedUnixNanos), FirstServed: unixText(j.FirstServedUnixNanos), Done: unixText(j.DoneUnixNanos)}
}

// RangeJSON is one range as shown by /api/ranges and `shoal admin ranges --format json`. Start and End
// are hex-encoded keys; an empty End means +infinity. StartKey and EndKey are the same keys in the
// convention of every key Shoal prints (see Key), with StartKeyEncoding and EndKeyEncoding set to
// "base64" when they are not readable text. Meta marks the meta range, whose span is not part of the
// user key space. Replicas are the voters' node ids, Learners the non-voting replicas' node ids, Leader
// the leader's node id: 0 in Go when unknown, which encodes as null.
type RangeJSON struct {
	ID               uint64   `json:"id"`
	Start            string   `json:"start"`
	End              string   `json:"end"`
	StartKey         string   `json:"start_key"`
	StartKeyEncoding string   `json:"start_key_encoding,omitempty"`
	EndKey           string   `json:"end_key"`
	EndKeyEncoding   string   `json:"end_key_encoding,omitempty"`
	Meta             bool     `json:"meta"`
	Replicas         []uint64 `json:"replicas"`
	Learners         []uint64 `json:"learners"`
	Generation       uint64   `json:"generation"`
	Leader           uint64   `json:"leader"`
	// Fences are the range's span fences (a table being re-keyed; retired: its old keys).
	Fences []FenceJSON `json:"fences,omitempty"`
}

// FenceJSON is one span fence of a range.
type FenceJSON struct {
	ID      uint64 `json:"id"`
	Start   string `json:"start"`
	End     string `json:"end"`
	Retired bool   `json:"retired,omitempty"`
}

// MarshalJSON encodes an unknown leader as null rather than as node 0, which does not exist.
func (r RangeJSON) MarshalJSON() ([]byte, error) {
	type fields RangeJSON // without this method
	var leader *uint64
	if r.Leader != 0 {
		leader = &r.Leader
	}
	return json.Marshal(struct {
		fields
		Leader *uint64 `json:"leader"`
	}{fields(r), leader})
}

// MetaRangeID is the id of the meta range (as replica.MetaRangeID; this package imports no layer).
const MetaRangeID = 1

// Base64 is the encoding named next to a key or value that is not readable text.
const Base64 = "base64"

// Key renders a key (or a value) in the one convention of Shoal's JSON output: the text itself when
// it is readable — valid UTF-8 without control characters other than tab, newline and carriage
// return — with an empty encoding, else its standard base64 with encoding Base64. Either way the
// bytes are recovered exactly.
func Key(b []byte) (text, encoding string) {
	if Readable(b) {
		return string(b), ""
	}
	return base64.StdEncoding.EncodeToString(b), Base64
}

// Readable reports whether b prints as text: valid UTF-8 without control characters other than tab,
// newline and carriage return.
func Readable(b []byte) bool {
	if !utf8.Valid(b) {
		return false
	}
	for _, r := range string(b) {
		if unicode.IsControl(r) && r != '\t' && r != '\n' && r != '\r' {
			return false
		}
	}
	return true
}

// NodesJSON converts node statuses, ordered by node id. It never returns nil (an empty list encodes as
// [], not null).
func NodesJSON(nodes []*pb.NodeStatus) []NodeJSON {
	out := make([]NodeJSON, 0, len(nodes))
	for _, n := range nodes {
		if n == nil {
			continue
		}
		d := n.GetDesc()
		out = append(out, NodeJSON{
			ID:          d.GetNodeId(),
			Addr:        d.GetAddr(),
			HTTPAddr:    d.GetHttpAddr(),
			Locality:    d.GetLocality(),
			Profile:     n.GetStats().GetProfile(),
			Live:        n.GetLive(),
			Draining:    n.GetDraining(),
			State:       n.GetState(),
			RangeCount:  n.GetRangeCount(),
			LeaderCount: n.GetLeaderCount(),
			Tasks:       TasksText(n.GetStats().GetTasks()),
			Join:        JoinStatusJSON(n.GetJoin()),
			Usage:       usageJSON(n.GetStats()),
		})
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// RangesJSON converts range statuses, ordered by start key (then range id). It never returns nil, and
// Replicas and Learners are never nil.
func RangesJSON(ranges []*pb.RangeStatus) []RangeJSON {
	type keyed struct {
		start []byte
		r     RangeJSON
	}
	ks := make([]keyed, 0, len(ranges))
	for _, r := range ranges {
		if r == nil {
			continue
		}
		d := r.GetDesc()
		rj := RangeJSON{
			ID:         d.GetRangeId(),
			Start:      hex.EncodeToString(d.GetStartKey()),
			End:        hex.EncodeToString(d.GetEndKey()),
			Meta:       d.GetRangeId() == MetaRangeID,
			Replicas:   []uint64{},
			Learners:   []uint64{},
			Leader:     r.GetLeaderNodeId(),
			Generation: d.GetGeneration(),
		}
		rj.StartKey, rj.StartKeyEncoding = Key(d.GetStartKey())
		rj.EndKey, rj.EndKeyEncoding = Key(d.GetEndKey())
		for _, rep := range d.GetReplicas() {
			if rep.GetLearner() {
				rj.Learners = append(rj.Learners, rep.GetNodeId())
			} else {
				rj.Replicas = append(rj.Replicas, rep.GetNodeId())
			}
		}
		for _, f := range d.GetFences() {
			rj.Fences = append(rj.Fences, FenceJSON{ID: f.GetId(), Start: hex.EncodeToString(f.GetStartKey()), End: hex.EncodeToString(f.GetEndKey()), Retired: f.GetRetired()})
		}
		ks = append(ks, keyed{start: d.GetStartKey(), r: rj})
	}
	sort.SliceStable(ks, func(i, j int) bool {
		if c := bytes.Compare(ks[i].start, ks[j].start); c != 0 {
			return c < 0
		}
		return ks[i].r.ID < ks[j].r.ID
	})
	out := make([]RangeJSON, len(ks))
	for i, k := range ks {
		out[i] = k.r
	}
	return out
}

// TasksText describes background tasks as "KIND STATE[ (heavy)]", never nil.
func TasksText(tasks []*pb.BackgroundTask) []string {
	out := []string{}
	for _, t := range tasks {
		state := "pending"
		if t.GetRunning() {
			state = "running"
		}
		s := t.GetKind() + " " + state
		if t.GetHeavy() {
			s += " (heavy)"
		}
		out = append(out, s)
	}
	return out
}
