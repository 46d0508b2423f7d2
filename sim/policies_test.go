package sim

import (
	"strings"
	"testing"

	"github.com/shoaldb/shoal/autopilot/decisions"
	"github.com/shoaldb/shoal/autopilot/operator"
	"github.com/shoaldb/shoal/autopilot/policy"
)

// policyScenarios names, for every policy of the standard registry, the scenario that gives it work
// and the operator kind it must carry out there ("" for a policy that is only a switch).
var policyScenarios = map[string]struct {
	scenario, kind string
}{
	policy.NameReplicate:       {"node-loss", operator.KindMoveReplica},
	policy.NameDecommission:    {"decommission", operator.KindMoveReplica},
	policy.NameDrain:           {"drain", operator.KindTransferLeader},
	policy.NameShed:            {"compaction", operator.KindTransferLeader},
	policy.NameJoin:            {"join", operator.KindMoveReplica},
	policy.NameLoadSplit:       {"hotspot", operator.KindSplit},
	policy.NameMerge:           {"merge", operator.KindMerge},
	policy.NameRebalance:       {"rebalance", operator.KindTransferLeader},
	policy.NameReadHints:       {"read-hints", ""},
	policy.NameReadReplicas:    {"read-replicas", operator.KindAddLearner},
	policy.NameHotspot:         {"hotspot-offload", operator.KindTransferLeader},
	policy.NameNodeProfiles:    {"node-profiles", operator.KindSetProfile},
	policy.NameLeasePreference: {"lease-preference", operator.KindTransferLeader},
	policy.NameUsageBalance:    {"usage-balance", operator.KindTransferLeader},
}

// noScenario says, for a policy no simulated scenario can give work, why.
var noScenario = map[string]string{
	policy.NameRekey:       "it acts only on a re-key's plan, and the simulator runs no re-key",
	policy.NameStreamAlign: "it acts on stream tasks' events, and the simulator models no stream tasks",
}

// TestEveryPolicyRunsInTheSimulator: each registered policy, on, carries out at least one operator of
// its kind in its scenario, and none when switched off; a policy added to the registry without a
// scenario here fails the test.
func TestEveryPolicyRunsInTheSimulator(t *testing.T) {
	for _, st := range policy.Default(policy.DefaultConfig()).List() {
		t.Run(st.Name, func(t *testing.T) {
			if why, ok := noScenario[st.Name]; ok {
				t.Skipf("%s has no scenario: %s", st.Name, why)
			}
			ps, ok := policyScenarios[st.Name]
			if !ok {
				t.Fatalf("policy %s has no scenario in policyScenarios", st.Name)
			}
			sc, ok := Lookup(ps.scenario)
			if !ok || sc.Policy != st.Name {
				t.Fatalf("scenario %q is not about policy %s", ps.scenario, st.Name)
			}
			res, err := Run(sc, Options{Seed: 1})
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Decisions) != 2 {
				t.Fatalf("%d runs, want the policy on and off", len(res.Decisions))
			}
			on, off := count(res.Decisions[0], st.Name, ps.kind), count(res.Decisions[1], st.Name, "")
			if off != 0 {
				t.Errorf("%d decisions of %s with the policy off", off, st.Name)
			}
			if ps.kind == "" {
				if n := count(res.Decisions[0], st.Name, ""); n != 0 {
					t.Errorf("the switch %s decided %d operators", st.Name, n)
				}
				return
			}
			if on == 0 {
				t.Fatalf("no succeeded %s by %s; decisions:\n%s", ps.kind, st.Name, dump(res.Decisions[0]))
			}
			t.Logf("%s: %d succeeded %s operators; run: %+v", ps.scenario, on, ps.kind, res.Report.Runs[0].Operators)
		})
	}
}

// count is the number of succeeded decisions of policy name (of operator kind, if set).
func count(decs []Decision, name, kind string) int {
	n := 0
	for _, d := range decs {
		if d.Policy == name && d.Status == decisions.StatusSucceeded && (kind == "" || d.Kind == kind) {
			n++
		}
	}
	return n
}

func dump(decs []Decision) string {
	var b strings.Builder
	for i, d := range decs {
		if i == 40 {
			b.WriteString("…\n")
			break
		}
		b.WriteString(d.Time.Format("15:04:05.000") + " " + d.Policy + " " + d.Operator + ": " + d.Status + "\n")
	}
	return b.String()
}
