package policy

import (
	"bytes"
	"fmt"
	"math/rand"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"github.com/shoaldb/shoal/autopilot/model"
	"github.com/shoaldb/shoal/autopilot/operator"
	"github.com/shoaldb/shoal/plan/hotspot"
)

// TestPolicies runs the data-driven policy tests in testdata/. Each file describes clusters in the
// compact text form (model.ParseCluster) and shows the operators the policies propose, with their
// reasons, predicted benefits and influence. Rewrite the expected output after an intended change with
//
//	go test ./autopilot/policy -run TestPolicies -rewrite
//
// Commands:
//
//	new [factor=N] [qps-threshold=Q] [dead-after=D] [ranking=R] [join=S] [join-order=O] [join-sender=S] [serve-at-end=B]
//	    [profile-sample=D] [profile-samples=N] [hotspot-slo=D] [hotspot-seed=DUR:on|off:PENALTY/...] [on=NAME]
//	                                                   fresh policies (state and switches) and no pending operators
//	cluster                                            replace the cluster with the one in the input (policy state is kept)
//	switch NAME=on|off ...                             flip policy switches
//	propose [only=NAME] [keep]                         one round; keep adds the proposals to the pending operators
//	pending                                            list the pending operators
//	finish                                             complete every pending operator on the cluster (a
//	                                                   SetProfile: the node runs the profile)
//	advance DURATION                                   move the clock; live nodes keep heartbeating
//	load dist=D qps=Q windows=W [records=N] [seed=S] [only=NAME] [keep]
//	                                                   W one-second windows of Q requests with YCSB distribution D over
//	                                                   keys user0000000000…; each user range reports the QPS and a key
//	                                                   sample of what it received; a policy round runs after each window
//	search range=ID                                    load_split's split-key search state for a range
//	quiet                                              every range stops serving requests
//	steady rounds=N [every=D]                          N rounds of propose, keep, finish and advance D (default 10s) on
//	                                                   a workload that does not change; lists the operators and every
//	                                                   leadership that came back to a node it had left
//	usage                                              usage_balance's predicted usage per node at its last round
func TestPolicies(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		h := &harness{}
		h.reset(Config{})
		datadriven.RunTest(t, path, func(t *testing.T, td *datadriven.TestData) string {
			out, err := h.run(t, td)
			if err != nil {
				return "error: " + err.Error() + "\n"
			}
			return out
		})
	})
}

type harness struct {
	reg      *Registry
	c        *model.Cluster
	pending  []*operator.Operator
	nextID   uint64
	samplers map[uint64]*model.KeySampler
}

func (h *harness) reset(cfg Config) {
	h.reg = Default(cfg)
	h.pending = nil
	h.samplers = map[uint64]*model.KeySampler{}
	if h.c == nil {
		h.c = model.NewCluster(model.TextEpoch, nil, nil)
	}
}

func (h *harness) run(t *testing.T, td *datadriven.TestData) (string, error) {
	switch td.Cmd {
	case "new":
		var cfg Config
		var seed []hotspot.Point
		var on []string
		for _, a := range td.CmdArgs {
			v := a.SingleVal(t)
			var err error
			switch a.Key {
			case "factor":
				_, err = fmt.Sscan(v, &cfg.Replicate.Factor)
			case "qps-threshold":
				_, err = fmt.Sscan(v, &cfg.LoadSplit.QPSThreshold)
			case "dead-after":
				cfg.Replicate.DeadAfter, err = time.ParseDuration(v)
			case "ranking":
				cfg.Shed.Ranking = v
			case "join":
				cfg.Join.Strategy = v
			case "join-order":
				cfg.Join.Order = v
			case "join-sender":
				cfg.Join.Sender = v
			case "serve-at-end":
				cfg.Join.ServeAtEnd = v == "true"
			case "profile-sample":
				cfg.NodeProfiles.SampleEvery, err = time.ParseDuration(v)
			case "profile-samples":
				_, err = fmt.Sscan(v, &cfg.NodeProfiles.Samples)
			case "hotspot-slo":
				cfg.Hotspot.SLO, err = time.ParseDuration(v)
			case "hotspot-seed":
				seed, err = parseHotspotSeed(v)
			case "on":
				on = append(on, v)
			default:
				return "", fmt.Errorf("unknown argument %q", a.Key)
			}
			if err != nil {
				return "", err
			}
		}
		h.reset(cfg)
		for _, name := range on {
			if err := h.reg.Set(name, true); err != nil {
				return "", err
			}
		}
		if len(seed) > 0 {
			hs := h.reg.Policy(NameHotspot).(*HotspotOffload)
			hs.Seed(seed)
			be, _ := hs.BreakEven()
			return fmt.Sprintf("ok\nhotspot_offload: %d measured hot spots, break-even %s\n", len(seed), fmtSeconds(be)), nil
		}
		return "ok\n", nil
	case "cluster":
		c, err := model.ParseCluster(td.Input)
		if err != nil {
			return "", err
		}
		h.c = c
		return loads(c), nil
	case "switch":
		for _, a := range td.CmdArgs {
			if err := h.reg.Set(a.Key, a.SingleVal(t) == "on"); err != nil {
				return "", err
			}
		}
		var b strings.Builder
		for _, s := range h.reg.List() {
			fmt.Fprintf(&b, "%s: %v\n", s.Name, map[bool]string{true: "on", false: "off"}[s.On])
		}
		return b.String(), nil
	case "propose":
		var only string
		td.MaybeScanArgs(t, "only", &only)
		ops := h.propose(only)
		if td.HasArg("keep") {
			h.keep(ops)
		}
		return formatOps(ops) + formatNotes(h.reg.TakeNotes()) + h.applyJoinMarks(), nil
	case "pending":
		return formatOps(h.pending), nil
	case "finish":
		h.finish()
		return loads(h.c), nil
	case "advance":
		d, err := time.ParseDuration(td.CmdArgs[0].Key)
		if err != nil {
			return "", err
		}
		h.advance(d, nil)
		return fmt.Sprintf("now %s\n", h.c.Now.Sub(model.TextEpoch)), nil
	case "load":
		return h.load(t, td)
	case "quiet":
		ranges := h.cloneRanges()
		for _, r := range ranges {
			r.ReadQPS, r.WriteQPS, r.Sample = 0, 0, nil
		}
		h.rebuild(h.c.Now, ranges)
		return loads(h.c), nil
	case "steady":
		return h.steady(t, td), nil
	case "usage":
		return h.usage(), nil
	case "rekey-plan":
		return h.rekeyPlan(td)
	case "search":
		var id uint64
		td.ScanArgs(t, "range", &id)
		ls := h.reg.Policy(NameLoadSplit).(*LoadSplit)
		st, ok := ls.Search(id)
		if !ok {
			return fmt.Sprintf("r%d: not watched\n", id), nil
		}
		return fmt.Sprintf("r%d: %d sampled requests, linear=%v, %d switches, key %s\n", id, st.Observed, st.Linear,
			st.Switches, model.FormatKey(st.Key)), nil
	}
	return "", fmt.Errorf("unknown command %q", td.Cmd)
}

// rekeyPlan hands the rekey policy a plan: "rekey-plan r2=n3 r5=n1".
func (h *harness) rekeyPlan(td *datadriven.TestData) (string, error) {
	var ls []Placement
	for _, a := range td.CmdArgs {
		var l Placement
		if _, err := fmt.Sscanf(a.Key+"="+a.Vals[0], "r%d=n%d", &l.Range, &l.Node); err != nil {
			return "", fmt.Errorf("placement %q: want rN=nM: %w", a.Key, err)
		}
		ls = append(ls, l)
	}
	queued, inPlace, refused := h.reg.Policy(NameRekey).(*Rekey).Request(h.c, ls, "re-key t: planned")
	out := fmt.Sprintf("queued %d, in place %d, refused %d\n", queued, inPlace, len(refused))
	for _, r := range refused {
		out += "  " + r + "\n"
	}
	return out, nil
}

func (h *harness) propose(only string) []*operator.Operator {
	if only != "" {
		p := h.reg.Policy(only)
		if p == nil || !h.reg.Enabled(only) {
			return nil
		}
		return p.Propose(h.c, h.pending)
	}
	return h.reg.Propose(h.c, h.pending)
}

func (h *harness) keep(ops []*operator.Operator) {
	for _, op := range ops {
		h.nextID++
		op.ID = h.nextID
		h.pending = append(h.pending, op)
	}
}

func formatOps(ops []*operator.Operator) string {
	if len(ops) == 0 {
		return "no operators\n"
	}
	var b strings.Builder
	for _, op := range ops {
		fmt.Fprintf(&b, "%s %s: %s\n", op.Policy, op.Priority, op)
		fmt.Fprintf(&b, "  reason: %s\n", op.Reason)
		fmt.Fprintf(&b, "  predicted: %s\n", op.PredictedBenefit)
		if s := op.Influence.String(); s != "" {
			fmt.Fprintf(&b, "  influence: %s\n", s)
		}
	}
	return b.String()
}

// loads prints each node's derived totals.
func loads(c *model.Cluster) string {
	var b strings.Builder
	for _, n := range c.Nodes {
		state := "live"
		switch {
		case n.Decommissioned:
			state = "decommissioned"
		case !n.Live:
			state = fmt.Sprintf("silent %s", n.SilentFor(c.Now))
		}
		if n.Draining {
			state += ", draining"
		}
		if n.Decommissioning {
			state += ", decommissioning"
		}
		if n.Profile != "" {
			state += ", profile " + n.Profile
		}
		fmt.Fprintf(&b, "n%d (%s): %d replicas, %d leaders, %s, %s\n", n.ID, state, n.Replicas, n.Leaders,
			model.FormatBytes(n.Bytes), fmtQPS(n.QPS))
	}
	return b.String()
}

// rebuild makes a new snapshot at now from copies of the current nodes and the given ranges.
func (h *harness) rebuild(now time.Time, ranges []*model.Range) {
	nodes := make([]*model.Node, len(h.c.Nodes))
	for i, n := range h.c.Nodes {
		cp := *n
		nodes[i] = &cp
	}
	zones := h.c.LeadZones
	h.c = model.NewCluster(now, nodes, ranges)
	h.c.LeadZones = zones
}

func (h *harness) cloneRanges() []*model.Range {
	out := make([]*model.Range, len(h.c.Ranges))
	for i, r := range h.c.Ranges {
		cp := *r
		cp.Replicas = append([]model.Replica(nil), r.Replicas...)
		out[i] = &cp
	}
	return out
}

func (h *harness) advance(d time.Duration, ranges []*model.Range) {
	if ranges == nil {
		ranges = h.cloneRanges()
	}
	now := h.c.Now.Add(d)
	h.rebuild(now, ranges)
	for _, n := range h.c.Nodes {
		if n.Live {
			n.LastHeartbeat = now
		}
	}
}

// finish applies every pending operator to the cluster as if it had completed.
func (h *harness) finish() {
	ranges := h.cloneRanges()
	byID := map[uint64]*model.Range{}
	var maxID uint64
	for _, r := range ranges {
		byID[r.ID] = r
		maxID = max(maxID, r.ID)
	}
	profiles := map[uint64]string{}
	for _, op := range h.pending {
		r := byID[op.RangeID]
		if r == nil {
			continue
		}
		for _, s := range op.Steps {
			switch s := s.(type) {
			case operator.SetProfile:
				profiles[s.Node] = s.Profile
			case operator.Split:
				maxID++
				left := 0.5
				if r.Sample != nil {
					left = r.Sample.FractionBelow(s.Key)
				}
				right := &model.Range{ID: maxID, StartKey: s.Key, EndKey: r.EndKey, Leader: r.Leader,
					Replicas: append([]model.Replica(nil), r.Replicas...), ReadQPS: r.ReadQPS * (1 - left),
					WriteQPS: r.WriteQPS * (1 - left), Bytes: r.Bytes / 2}
				r.ReadQPS, r.WriteQPS, r.Bytes = r.ReadQPS*left, r.WriteQPS*left, r.Bytes-right.Bytes
				ranges = append(ranges, right)
				byID[right.ID] = right
			case operator.Merge:
				if right := byID[s.RightRangeID]; right != nil {
					r.Bytes += right.Bytes
					r.ReadQPS += right.ReadQPS
					r.WriteQPS += right.WriteQPS
					delete(byID, right.ID)
					for i, x := range ranges {
						if x == right {
							ranges = append(ranges[:i], ranges[i+1:]...)
							break
						}
					}
				}
			}
			next := s.Apply(r)
			*r = *next
		}
	}
	h.pending = nil
	h.rebuild(h.c.Now, ranges)
	for _, n := range h.c.Nodes {
		if p, ok := profiles[n.ID]; ok {
			n.Profile = p
		}
	}
}

func (h *harness) load(t *testing.T, td *datadriven.TestData) (string, error) {
	dist, records, qps, windows, seed := "zipfian", int64(100_000), 3000, 20, int64(1)
	td.ScanArgs(t, "dist", &dist)
	td.ScanArgs(t, "qps", &qps)
	td.ScanArgs(t, "windows", &windows)
	td.MaybeScanArgs(t, "records", &records)
	td.MaybeScanArgs(t, "seed", &seed)
	gen, err := newKeyGen(dist, records)
	if err != nil {
		return "", err
	}
	rng := rand.New(rand.NewSource(seed))
	var b strings.Builder
	start := h.c.Now
	for w := 0; w < windows; w++ {
		ranges := h.cloneRanges()
		var user []*model.Range
		for _, r := range ranges {
			if !r.System {
				user = append(user, r)
				r.ReadQPS = 0
			}
		}
		sort.Slice(user, func(i, j int) bool { return bytes.Compare(user[i].StartKey, user[j].StartKey) < 0 })
		for i := 0; i < qps; i++ {
			k := gen(rng)
			j := sort.Search(len(user), func(j int) bool { return bytes.Compare(user[j].StartKey, k) > 0 }) - 1
			if j < 0 || !user[j].ContainsKey(k) {
				continue
			}
			r := user[j]
			r.ReadQPS++
			s := h.samplers[r.ID]
			if s == nil {
				s = model.NewKeySampler(0, r.ID)
				h.samplers[r.ID] = s
			}
			s.Record(k)
		}
		now := h.c.Now.Add(time.Second)
		for _, r := range user {
			if s := h.samplers[r.ID]; s != nil {
				r.Sample = s.Take(now)
			}
		}
		h.advance(time.Second, ranges)
		var only string
		td.MaybeScanArgs(t, "only", &only)
		ops := h.propose(only)
		if len(ops) > 0 {
			fmt.Fprintf(&b, "after %s:\n%s", h.c.Now.Sub(start), formatOps(ops))
			if td.HasArg("keep") {
				h.keep(ops)
			}
		}
	}
	if b.Len() == 0 {
		fmt.Fprintf(&b, "%d windows: no operators\n", windows)
	}
	return b.String(), nil
}

// formatNotes prints the notes of a round (postponements and the like), by policy in priority order.
func formatNotes(notes map[string][]Note) string {
	names := make([]string, 0, len(notes))
	for name := range notes {
		names = append(names, name)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, name := range names {
		for _, n := range notes[name] {
			fmt.Fprintf(&b, "note %s [%s]: %s\n  reason: %s\n", name, n.Status, n.What, n.Why)
		}
	}
	return b.String()
}

// applyJoinMarks does what the autopilot does with incremental_join's marks: records each node's join
// (in the harness's cluster, for the next rounds), and prints them.
func (h *harness) applyJoinMarks() string {
	jp, ok := h.reg.Policy(NameJoin).(*IncrementalJoin)
	if !ok {
		return ""
	}
	marks := jp.Marks()
	if len(marks) == 0 {
		return ""
	}
	var b strings.Builder
	for _, m := range marks {
		if n := h.c.Node(m.Node); n != nil {
			j := m.Join
			n.Join = &j
		}
		state := "joining"
		switch {
		case !m.Join.Done.IsZero():
			state = "joined"
		case !m.Join.FirstServed.IsZero():
			state = "partially joined"
		}
		fmt.Fprintf(&b, "join n%d: %s (%s, target %d)\n  reason: %s\n", m.Node, state, m.Join.Strategy, m.Join.Target, m.Why)
	}
	h.rebuild(h.c.Now, h.cloneRanges())
	return b.String()
}
