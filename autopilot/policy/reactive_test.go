package policy

import (
	"strings"
	"testing"
	"time"

	"github.com/shoaldb/shoal/autopilot/model"
	"github.com/shoaldb/shoal/autopilot/operator"
)

// TestProposeReactiveRunsOnlyReactivePolicies: a round triggered by an operator's progress runs the
// policies that schedule sequential work (the join) and none of those paced by rounds.
func TestProposeReactiveRunsOnlyReactivePolicies(t *testing.T) {
	c, err := model.ParseCluster(fourNodes + `
range 2 [a,c) voters=1,2 leader=1 reads=100
range 3 [c,e) voters=1,2,3 leader=2 reads=900
`)
	if err != nil {
		t.Fatal(err)
	}
	r := Default(DefaultConfig())
	byPolicy := func(ops []string) map[string]bool {
		m := map[string]bool{}
		for _, p := range ops {
			m[p] = true
		}
		return m
	}
	var all, reactive []string
	for _, op := range r.Propose(c, nil) {
		all = append(all, op.Policy)
	}
	for _, op := range r.ProposeReactive(c, nil) {
		reactive = append(reactive, op.Policy)
		if _, ok := r.Policy(op.Policy).(Reactive); !ok {
			t.Errorf("reactive round: %s (not reactive) proposed %s", op.Policy, op)
		}
	}
	if !byPolicy(all)[NameReplicate] {
		t.Fatalf("regular round proposed %v: want replicate to re-replicate r2", all)
	}
	for _, name := range []string{NameJoin, NameDecommission} {
		if _, ok := r.Policy(name).(Reactive); !ok {
			t.Errorf("%s is not reactive", name)
		}
	}
	t.Logf("regular round: %v; reactive round: %v", all, reactive)
}

// TestJoinNotDoneWithASurplusVoter: a join whose node holds its share only by counting a surplus
// voter (a move cut short between promotion and removal) is not complete until replicate settles
// the range, since replicate may take that voter from the new node.
func TestJoinNotDoneWithASurplusVoter(t *testing.T) {
	text := fourNodes + `
range 2 [a,c) voters=1,2,4 leader=4 reads=100
range 3 [c,e) voters=1,2,3,4 leader=2 reads=900
range 4 [e,g) voters=1,3,4 leader=3 reads=50
range 5 [g,k) voters=2,3,4 leader=1 reads=400
`
	c, err := model.ParseCluster(text)
	if err != nil {
		t.Fatal(err)
	}
	p := NewIncrementalJoin(JoinConfig{}, 3)
	start := &model.Join{Strategy: JoinIncremental, Started: c.Now, Target: 4}
	c.Node(4).Join = start
	p.Propose(c, nil)
	for _, m := range p.Marks() {
		if !m.Join.Done.IsZero() {
			t.Fatalf("join marked done with r3 holding 4 voters: %+v", m)
		}
	}
	// Settled (r3 lost its surplus voter on n1): n4 holds its share of 4 and the join is done.
	c2, err := model.ParseCluster(strings.Replace(text, "voters=1,2,3,4", "voters=2,3,4", 1))
	if err != nil {
		t.Fatal(err)
	}
	c2.Node(4).Join = start
	p.Propose(c2, nil)
	done := false
	for _, m := range p.Marks() {
		done = done || !m.Join.Done.IsZero()
	}
	if !done {
		t.Fatal("settled join with the node at its share not marked done")
	}
}

// TestJoinNotDoneBelowItsLeaderShare: a node holding its replica share but no leadership, whose
// ranges are all busy with other operators, is not done: it waits to take its leadership.
func TestJoinNotDoneBelowItsLeaderShare(t *testing.T) {
	c, err := model.ParseCluster(fourNodes + `
range 2 [a,c) voters=1,2,4 leader=1 reads=100
range 3 [c,e) voters=2,3,4 leader=2 reads=900
range 4 [e,g) voters=1,3,4 leader=3 reads=50
range 5 [g,k) voters=1,2,3 leader=1 reads=400
`)
	if err != nil {
		t.Fatal(err)
	}
	c.Node(4).Join = &model.Join{Strategy: JoinIncremental, Started: c.Now, Target: 3}
	var pending []*operator.Operator
	for _, id := range []uint64{2, 3, 4} {
		pending = append(pending, operator.NewTransferLeader("other", c.Now, c.Range(id), c.Range(id).Voters()[0], "busy"))
	}
	p := NewIncrementalJoin(JoinConfig{}, 3)
	if ops := p.Propose(c, pending); len(ops) != 0 {
		t.Fatalf("proposed %v on busy ranges", ops)
	}
	for _, m := range p.Marks() {
		if !m.Join.Done.IsZero() {
			t.Fatalf("join done with n4 leading nothing (share 1): %+v", m)
		}
	}
	ops := p.Propose(c, nil)
	if len(ops) != 1 || ops[0].Kind != operator.KindTransferLeader {
		t.Fatalf("once the ranges are free: proposed %v, want one leadership transfer to n4", ops)
	}
}

// TestJoinNextMoveStartsOnceTheSnapshotIsIn: an incremental join streams one snapshot at a time. A
// move whose add-learner step is still running (its learner receiving the snapshot) holds the next
// move back; once the executor has completed that step (the learner caught up), the next move starts
// while the first one promotes its learner — except while the node leads no range yet: its first
// range is served before anything else streams. A learner no operator is moving holds moves back too.
func TestJoinNextMoveStartsOnceTheSnapshotIsIn(t *testing.T) {
	text := fourNodes + `
range 2 [a,c) voters=1,2,3 learners=4 leader=1 reads=900
range 3 [c,e) voters=1,2,3 leader=2 reads=500
range 4 [e,g) voters=1,2,3 leader=3 reads=400
range 5 [g,k) voters=1,2,3 leader=1 reads=300
range 6 [k,m) voters=2,3,4 leader=4 reads=100
`
	for _, tc := range []struct {
		name      string
		stepsDone int  // of the move of r2 (-1: no operator moves r2)
		leadsNone bool // n4 does not lead r6 yet: the move of r2 is its first hand-over
		wantMove  bool // another move is proposed
	}{
		{"snapshot in flight", 0, false, false},
		{"learner caught up, promotion pending", 1, false, true},
		{"promoted, leadership hand-over pending", 2, false, true},
		{"first hand-over pending", 2, true, false},
		{"stray learner", -1, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			txt := text
			if tc.leadsNone {
				txt = strings.Replace(txt, "voters=2,3,4 leader=4", "voters=2,3,4 leader=2", 1)
			}
			c, err := model.ParseCluster(txt)
			if err != nil {
				t.Fatal(err)
			}
			c.Node(4).Join = &model.Join{Strategy: JoinIncremental, Started: c.Now, Target: 3}
			var pending []*operator.Operator
			if tc.stepsDone >= 0 {
				plain, err := model.ParseCluster(strings.Replace(txt, " learners=4", "", 1))
				if err != nil {
					t.Fatal(err)
				}
				op := operator.NewMoveReplica(NameJoin, c.Now, plain, plain.Range(2), 1, 4, "test")
				op.SetStepsDone(tc.stepsDone)
				pending = append(pending, op)
			}
			p := NewIncrementalJoin(JoinConfig{}, 3)
			var moves []string
			for _, op := range p.Propose(c, pending) {
				if op.Kind == operator.KindMoveReplica {
					moves = append(moves, op.String())
				}
			}
			if got := len(moves) > 0; got != tc.wantMove {
				t.Fatalf("moves proposed: %v; want a move: %v", moves, tc.wantMove)
			}
			if len(moves) > 1 {
				t.Fatalf("moves proposed: %v; want one at a time", moves)
			}
		})
	}
}

// TestJoinBelowShareWaitsBeforeFinishing: a join that finds no move possible (the range the node
// lacks is busy with another policy's operator) stays open, and finishes below its share only after
// belowShareGrace without any move.
func TestJoinBelowShareWaitsBeforeFinishing(t *testing.T) {
	text := fourNodes + `
range 2 [a,c) voters=1,2,4 leader=4 reads=900
range 3 [c,e) voters=1,2,3 leader=2 reads=500
`
	c, err := model.ParseCluster(text)
	if err != nil {
		t.Fatal(err)
	}
	c.Node(4).Join = &model.Join{Strategy: JoinIncremental, Started: c.Now, Target: 2}
	busy := operator.NewTransferLeader("drain", c.Now, c.Range(3), 1, "busy")
	p := NewIncrementalJoin(JoinConfig{}, 3)
	done := func(at time.Duration) bool {
		c.Now = c.Now.Add(at)
		if ops := p.Propose(c, []*operator.Operator{busy}); len(ops) != 0 {
			t.Fatalf("proposed %v with r3 busy", ops)
		}
		return joinMarkedDone(p)
	}
	if done(0) {
		t.Fatal("join done at 1 of 2 replicas while r3 is busy")
	}
	if done(belowShareGrace / 2) {
		t.Fatal("join done below its share before the grace passed")
	}
	if !done(belowShareGrace) {
		t.Fatal("join still open after the grace without any move possible")
	}
}

// fourNodes starts the clusters of these tests: four nodes and the system range on the first three.
const fourNodes = `
node 1
node 2
node 3
node 4
range 1 [,) voters=1,2,3 leader=1 system`

// joinMarkedDone reports whether p's marks since the last call include a join done.
func joinMarkedDone(p *IncrementalJoin) bool {
	done := false
	for _, m := range p.Marks() {
		done = done || !m.Join.Done.IsZero()
	}
	return done
}

// TestParallelJoinHandsOverFromTheBusiestLeaders: at the end of a parallel join the new node takes
// every leadership of its share at once. It takes them from the nodes that lead the most, so the
// donors end balanced, however hot the ranges the others lead.
func TestParallelJoinHandsOverFromTheBusiestLeaders(t *testing.T) {
	c, err := model.ParseCluster(fourNodes + `
range 2 [a,b) voters=1,2,4 leader=1 reads=10
range 3 [b,c) voters=1,3,4 leader=1 reads=10
range 4 [c,d) voters=1,2,4 leader=1 reads=10
range 5 [d,e) voters=1,3,4 leader=1 reads=10
range 6 [e,f) voters=2,3,4 leader=2 reads=900
range 7 [f,g) voters=2,1,4 leader=2 reads=850
range 8 [g,h) voters=3,1,4 leader=3 reads=800
range 9 [h,k) voters=3,2,4 leader=3 reads=700
`)
	if err != nil {
		t.Fatal(err)
	}
	c.Node(4).Join = &model.Join{Strategy: JoinParallel, Started: c.Now, Target: 6}
	ops := NewIncrementalJoin(JoinConfig{}, 3).Propose(c, nil)
	if len(ops) != 2 {
		t.Fatalf("proposed %v, want the two leaderships of n4's share", ops)
	}
	for _, op := range ops {
		if op.Kind != operator.KindTransferLeader || c.Range(op.RangeID).Leader != 1 {
			t.Errorf("%v: want a transfer from n1, which leads 4 ranges while n2 and n3 lead 2 each", op)
		}
	}
}
