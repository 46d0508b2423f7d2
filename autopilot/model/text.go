package model

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"
)

// TextEpoch is time zero of clusters written in the compact text form: "now 90s" means TextEpoch+90s.
var TextEpoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// ParseCluster reads the compact text form used by the autopilot's data-driven tests, one item per
// line ('#' starts a comment):
//
//	now 120s
//	node 1 [down|dead|draining|decommissioning|decommissioned] [silent=70s] [cpu=35] [reads=300] [disk-busy=0.5] [disk=40GiB/500GiB] [locality=zone=a]
//	       [task=KIND:pending|running[:light][:in=BYTES][:age=D]]... [done=KIND@AGO]... [led-before=2,3]
//	       [cache=64MiB/4KiB]
//	range 2 [a,m) voters=1,2,3 [learners=4] [leader=1] [bytes=10MiB] [reads=2000] [replica-reads=300] [writes=500] [system] [fenced]
//	        [latency=990@2ms,10@40ms] [hist=50x100,0.5x20000] [hits=90/100] [scanblocks=300] [scanrows=5000]
//	        [stream=3000] [stream-keys=c*40,d*10]
//	lead-zone [[a,m)] ZONE
//
// A node is live and heard from at "now" unless stated otherwise: "down" is not live and silent for
// 5s, "dead" is not live and silent for 70s, silent=D sets the silence (and makes the node not live
// when D > 10s). task= adds a background task (heavy unless :light; in= its input bytes, age= how long
// it has run), done= says a task of KIND completed AGO before now, led-before= lists the ranges the
// node led before its last heavy task. latency= is the latency histogram the range's leader reported
// at now: COUNT requests took DURATION, for each pair. Spans are [start,end) with bare keys; an empty
// start or end is open. A range's leader defaults to its first voter. cache= is a node's block cache
// and block size; hist= a range's block-access histogram (RATExBLOCKS: BLOCKS blocks read RATE times
// a second each), hits= its measured point reads served from the cache, scanblocks= the blocks its
// scans read a second and scanrows= the rows they returned a second (usage.go); stream= the stream
// events its leader's tasks applied a second and stream-keys= a sample of their keys, KEY*COUNT
// (stream.go). lead-zone asks that the ranges of the span (without one: every range) be led in ZONE.
func ParseCluster(text string) (*Cluster, error) {
	p := &textParser{now: TextEpoch}
	for lineNo, line := range strings.Split(text, "\n") {
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if err := p.item(f); err != nil {
			return nil, fmt.Errorf("line %d %q: %v", lineNo+1, strings.TrimSpace(line), err)
		}
	}
	return p.cluster(), nil
}

// textParser collects the items of ParseCluster's text. Times relative to "now" (silences, task ages,
// completions) are kept aside and applied once the whole text is read, since "now" may come last.
type textParser struct {
	now      time.Time
	nodes    []*Node
	ranges   []*Range
	dones    []taskDone
	silences []silence
	ages     []taskAge
	// leadZones are the lead-zone items.
	leadZones []LeadZone
}

// taskDone is a done= item: a task of kind completed ago before now.
type taskDone struct {
	node *Node
	kind string
	ago  time.Duration
}

// silence is how long before now a node was last heard from.
type silence struct {
	node *Node
	d    time.Duration
}

// taskAge is a task's age.
type taskAge struct {
	node *Node
	i    int
	age  time.Duration
}

func (p *textParser) item(f []string) error {
	switch f[0] {
	case "now":
		if len(f) != 2 {
			return fmt.Errorf("want: now DURATION")
		}
		d, err := time.ParseDuration(f[1])
		if err != nil {
			return err
		}
		p.now = TextEpoch.Add(d)
		return nil
	case "node":
		return p.node(f)
	case "range":
		return p.rangeItem(f)
	case "lead-zone":
		return p.leadZone(f)
	}
	return fmt.Errorf("unknown item %q (want now, node, range or lead-zone)", f[0])
}

// leadZone reads "lead-zone [start,end) ZONE" or "lead-zone ZONE" (the whole key space).
func (p *textParser) leadZone(f []string) error {
	switch len(f) {
	case 2:
		p.leadZones = append(p.leadZones, LeadZone{Zone: f[1]})
		return nil
	case 3:
		span := f[1]
		if !strings.HasPrefix(span, "[") || !strings.HasSuffix(span, ")") || !strings.Contains(span, ",") {
			return fmt.Errorf("span: want [start,end)")
		}
		start, end, _ := strings.Cut(span[1:len(span)-1], ",")
		p.leadZones = append(p.leadZones, LeadZone{Start: []byte(start), End: []byte(end), Zone: f[2]})
		return nil
	}
	return fmt.Errorf("want: lead-zone [[start,end)] ZONE")
}

func (p *textParser) node(f []string) error {
	if len(f) < 2 {
		return fmt.Errorf("want: node ID ...")
	}
	id, err := strconv.ParseUint(f[1], 10, 64)
	if err != nil {
		return fmt.Errorf("node id: %v", err)
	}
	n := &Node{ID: id, Addr: fmt.Sprintf("n%d:26257", id), Live: true}
	s := silence{node: n}
	for _, a := range f[2:] {
		k, v, _ := strings.Cut(a, "=")
		switch k {
		case "down":
			n.Live, s.d = false, 5*time.Second
		case "dead":
			n.Live, s.d = false, 70*time.Second
		case "draining":
			n.Draining = true
		case "locality":
			n.Locality = v
		case "profile":
			n.Profile = v
		case "cache":
			if err := parseCache(n, v); err != nil {
				return err
			}
		case "decommissioning":
			n.Decommissioning = true
		case "decommissioned":
			n.Decommissioned, n.Live = true, false
		case "silent":
			if s.d, err = time.ParseDuration(v); err != nil {
				return fmt.Errorf("silent: %v", err)
			}
			n.Live = s.d <= 10*time.Second
		case "reads":
			if n.ReadQPS, err = strconv.ParseFloat(v, 64); err != nil {
				return fmt.Errorf("reads: %v", err)
			}
		case "disk-busy":
			if n.DiskBusy, err = strconv.ParseFloat(v, 64); err != nil {
				return fmt.Errorf("disk-busy: %v", err)
			}
		case "cpu":
			if n.CPUPercent, err = strconv.ParseFloat(v, 64); err != nil {
				return fmt.Errorf("cpu: %v", err)
			}
			n.CPUCores = 1 // cpu= is the share of a one-core node
		case "disk":
			used, capacity, ok := strings.Cut(v, "/")
			if !ok {
				return fmt.Errorf("disk: want USED/CAPACITY")
			}
			if n.DiskUsed, err = ParseBytes(used); err != nil {
				return fmt.Errorf("disk: %v", err)
			}
			if n.DiskCapacity, err = ParseBytes(capacity); err != nil {
				return fmt.Errorf("disk: %v", err)
			}
		case "task":
			t, age, err := parseTask(v, uint64(len(n.Tasks)+1))
			if err != nil {
				return err
			}
			n.Tasks = append(n.Tasks, t)
			if age > 0 {
				p.ages = append(p.ages, taskAge{node: n, i: len(n.Tasks) - 1, age: age})
			}
		case "done":
			kind, ago, ok := strings.Cut(v, "@")
			d, perr := time.ParseDuration(ago)
			if !ok || perr != nil {
				return fmt.Errorf("done: want KIND@AGO (e.g. compaction@30s)")
			}
			p.dones = append(p.dones, taskDone{node: n, kind: kind, ago: d})
		case "led-before":
			ids, err := parseIDs(v)
			if err != nil {
				return fmt.Errorf("led-before: %v", err)
			}
			n.LedBefore = append(n.LedBefore, ids...)
		default:
			return fmt.Errorf("unknown node attribute %q", a)
		}
	}
	p.nodes = append(p.nodes, n)
	p.silences = append(p.silences, s)
	return nil
}

func (p *textParser) rangeItem(f []string) error {
	if len(f) < 3 {
		return fmt.Errorf("want: range ID [start,end) ...")
	}
	id, err := strconv.ParseUint(f[1], 10, 64)
	if err != nil {
		return fmt.Errorf("range id: %v", err)
	}
	span := f[2]
	if !strings.HasPrefix(span, "[") || !strings.HasSuffix(span, ")") || !strings.Contains(span, ",") {
		return fmt.Errorf("span: want [start,end)")
	}
	start, end, _ := strings.Cut(span[1:len(span)-1], ",")
	r := &Range{ID: id, StartKey: []byte(start), EndKey: []byte(end)}
	if start == "" {
		r.StartKey = nil
	}
	if end == "" {
		r.EndKey = nil
	}
	leaderSet := false
	for _, a := range f[3:] {
		k, v, _ := strings.Cut(a, "=")
		switch k {
		case "voters", "learners":
			ids, err := parseIDs(v)
			if err != nil {
				return fmt.Errorf("%s: %v", k, err)
			}
			for _, nid := range ids {
				r.Replicas = append(r.Replicas, Replica{Node: nid, Learner: k == "learners"})
			}
		case "leader":
			if r.Leader, err = strconv.ParseUint(v, 10, 64); err != nil {
				return fmt.Errorf("leader: %v", err)
			}
			leaderSet = true
		case "bytes":
			if r.Bytes, err = ParseBytes(v); err != nil {
				return fmt.Errorf("bytes: %v", err)
			}
		case "stream", "stream-keys":
			if err := parseStream(r, k, v); err != nil {
				return err
			}
		case "hist", "hits", "scanblocks", "scanrows":
			if err := parseAccess(r, k, v); err != nil {
				return err
			}
		case "reads":
			if r.ReadQPS, err = strconv.ParseFloat(v, 64); err != nil {
				return fmt.Errorf("reads: %v", err)
			}
		case "replica-reads":
			if r.ReplicaReadQPS, err = strconv.ParseFloat(v, 64); err != nil {
				return fmt.Errorf("replica-reads: %v", err)
			}
		case "writes":
			if r.WriteQPS, err = strconv.ParseFloat(v, 64); err != nil {
				return fmt.Errorf("writes: %v", err)
			}
		case "scans":
			if r.ScanQPS, err = strconv.ParseFloat(v, 64); err != nil {
				return fmt.Errorf("scans: %v", err)
			}
		case "system":
			r.System = true
		case "fenced":
			r.Fenced = true
		case "latency":
			if r.Latency, err = parseLatency(v); err != nil {
				return fmt.Errorf("latency: %v", err)
			}
		default:
			return fmt.Errorf("unknown range attribute %q", a)
		}
	}
	if !leaderSet {
		if v := r.Voters(); len(v) > 0 {
			r.Leader = v[0]
		}
	}
	p.ranges = append(p.ranges, r)
	return nil
}

// cluster applies the times relative to now and builds the snapshot.
func (p *textParser) cluster() *Cluster {
	for _, s := range p.silences {
		s.node.LastHeartbeat = p.now.Add(-s.d)
	}
	for _, a := range p.ages {
		a.node.Tasks[a.i].Since = p.now.Add(-a.age)
	}
	for _, d := range p.dones {
		if d.node.LastCompleted == nil {
			d.node.LastCompleted = map[string]time.Time{}
		}
		d.node.LastCompleted[d.kind] = p.now.Add(-d.ago)
	}
	for _, r := range p.ranges {
		if r.Latency != nil {
			r.Latency.At = p.now
		}
		if r.StreamSample != nil {
			r.StreamSample.At = p.now
		}
	}
	c := NewCluster(p.now, p.nodes, p.ranges)
	c.LeadZones = p.leadZones
	return c
}

// parseLatency reads COUNT@DURATION pairs, comma-separated, into a histogram.
func parseLatency(v string) (*LatencyHistogram, error) {
	var c LatencyCounts
	for _, x := range strings.Split(v, ",") {
		n, d, ok := strings.Cut(x, "@")
		if !ok {
			return nil, fmt.Errorf("%q: want COUNT@DURATION", x)
		}
		count, err := strconv.ParseUint(n, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%q: %v", x, err)
		}
		took, err := time.ParseDuration(d)
		if err != nil {
			return nil, fmt.Errorf("%q: %v", x, err)
		}
		c.counts[LatencyBucket(took)] += count
		c.total += count
	}
	return c.Histogram(time.Time{}), nil
}

// parseIDs reads a comma-separated list of IDs.
func parseIDs(v string) ([]uint64, error) {
	var out []uint64
	for _, x := range strings.Split(v, ",") {
		id, err := strconv.ParseUint(x, 10, 64)
		if err != nil {
			return nil, err
		}
		out = append(out, id)
	}
	return out, nil
}

// parseTask reads KIND:pending|running[:light][:in=BYTES][:age=DURATION].
func parseTask(v string, id uint64) (Task, time.Duration, error) {
	const want = "task: want KIND:pending|running[:light][:in=BYTES][:age=DURATION]"
	parts := strings.Split(v, ":")
	if len(parts) < 2 || (parts[1] != "pending" && parts[1] != "running") {
		return Task{}, 0, errors.New(want)
	}
	t := Task{ID: id, Kind: parts[0], Name: parts[0], Running: parts[1] == "running", Heavy: true}
	var age time.Duration
	for _, p := range parts[2:] {
		k, val, _ := strings.Cut(p, "=")
		var err error
		switch k {
		case "light":
			t.Heavy = false
		case "in":
			t.Bytes, err = ParseBytes(val)
		case "age":
			age, err = time.ParseDuration(val)
		default:
			err = fmt.Errorf("unknown part %q", p)
		}
		if err != nil {
			return Task{}, 0, fmt.Errorf("%s: %v", want, err)
		}
	}
	return t, age, nil
}

// Format writes c in the compact text form ParseCluster reads, followed by one comment line per node
// with its derived totals.
func (c *Cluster) Format() string {
	var b strings.Builder
	fmt.Fprintf(&b, "now %s\n", c.Now.Sub(TextEpoch))
	for _, n := range c.Nodes {
		fmt.Fprintf(&b, "node %d", n.ID)
		silent := n.SilentFor(c.Now)
		switch {
		case n.Decommissioned:
			b.WriteString(" decommissioned")
		case !n.Live || silent > 0:
			fmt.Fprintf(&b, " silent=%s", silent)
		}
		if n.Draining {
			b.WriteString(" draining")
		}
		if n.Decommissioning {
			b.WriteString(" decommissioning")
		}
		if n.Profile != "" {
			fmt.Fprintf(&b, " profile=%s", n.Profile)
		}
		if n.CPUPercent != 0 {
			fmt.Fprintf(&b, " cpu=%g", n.CPUPercent)
		}
		if n.DiskCapacity != 0 {
			fmt.Fprintf(&b, " disk=%s/%s", FormatBytes(n.DiskUsed), FormatBytes(n.DiskCapacity))
		}
		for _, t := range n.Tasks {
			fmt.Fprintf(&b, " task=%s:%s", t.Kind, t.State())
			if !t.Heavy {
				b.WriteString(":light")
			}
			if t.Bytes > 0 {
				fmt.Fprintf(&b, ":in=%s", FormatBytes(t.Bytes))
			}
			if !t.Since.IsZero() {
				fmt.Fprintf(&b, ":age=%s", c.Now.Sub(t.Since))
			}
		}
		kinds := make([]string, 0, len(n.LastCompleted))
		for k := range n.LastCompleted {
			kinds = append(kinds, k)
		}
		sort.Strings(kinds)
		for _, k := range kinds {
			fmt.Fprintf(&b, " done=%s@%s", k, c.Now.Sub(n.LastCompleted[k]))
		}
		if len(n.LedBefore) > 0 {
			fmt.Fprintf(&b, " led-before=%s", joinIDs(n.LedBefore))
		}
		b.WriteByte('\n')
	}
	for _, r := range c.Ranges {
		fmt.Fprintf(&b, "range %d [%s,%s)", r.ID, r.StartKey, r.EndKey)
		if v := r.Voters(); len(v) > 0 {
			fmt.Fprintf(&b, " voters=%s", joinIDs(v))
		}
		if l := r.Learners(); len(l) > 0 {
			fmt.Fprintf(&b, " learners=%s", joinIDs(l))
		}
		fmt.Fprintf(&b, " leader=%d", r.Leader)
		if r.Bytes != 0 {
			fmt.Fprintf(&b, " bytes=%s", FormatBytes(r.Bytes))
		}
		if r.ReadQPS != 0 {
			fmt.Fprintf(&b, " reads=%g", r.ReadQPS)
		}
		if r.WriteQPS != 0 {
			fmt.Fprintf(&b, " writes=%g", r.WriteQPS)
		}
		if r.ScanQPS != 0 {
			fmt.Fprintf(&b, " scans=%g", r.ScanQPS)
		}
		if r.StreamQPS != 0 {
			fmt.Fprintf(&b, " stream=%g", r.StreamQPS)
		}
		if r.System {
			b.WriteString(" system")
		}
		if r.Fenced {
			b.WriteString(" fenced")
		}
		b.WriteByte('\n')
	}
	for _, n := range c.Nodes {
		fmt.Fprintf(&b, "# n%d: replicas=%d leaders=%d bytes=%s qps=%g\n", n.ID, n.Replicas, n.Leaders,
			FormatBytes(n.Bytes), n.QPS)
	}
	return b.String()
}

func joinIDs(ids []uint64) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = strconv.FormatUint(id, 10)
	}
	return strings.Join(s, ",")
}

var byteUnits = []struct {
	suffix string
	mult   uint64
}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"B", 1}}

// ParseBytes reads a size such as 512, 64KiB, 10MiB or 1.5GiB.
func ParseBytes(s string) (uint64, error) {
	for _, u := range byteUnits {
		if num, ok := strings.CutSuffix(s, u.suffix); ok {
			f, err := strconv.ParseFloat(num, 64)
			if err != nil || f < 0 {
				return 0, fmt.Errorf("bad size %q", s)
			}
			return uint64(f * float64(u.mult)), nil
		}
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("bad size %q (want e.g. 512, 64KiB, 10MiB)", s)
	}
	return v, nil
}

// FormatBytes renders a size with the largest binary unit that keeps it at least 1, with at most two
// decimals (e.g. "1.5GiB", "512B").
func FormatBytes(v uint64) string {
	for _, u := range byteUnits {
		if v >= u.mult && u.mult > 1 {
			num := strconv.FormatFloat(float64(v)/float64(u.mult), 'f', 2, 64)
			num = strings.TrimRight(strings.TrimRight(num, "0"), ".")
			return num + u.suffix
		}
	}
	return strconv.FormatUint(v, 10) + "B"
}
