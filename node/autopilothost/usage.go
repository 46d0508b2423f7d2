package autopilothost

import "github.com/shoaldb/shoal/autopilot/policy"

// AsksForNode reports whether the autopilot running here (on the meta range's leader) has
// usage_balance switched on and asking for one more node: a node's predicted usage stays above its
// threshold and no move lowers it. False on every other node.
func (h *Host) AsksForNode() bool {
	a := h.running()
	if a == nil || !a.Policies().Enabled(policy.NameUsageBalance) {
		return false
	}
	ub, ok := a.Policies().Policy(policy.NameUsageBalance).(*policy.UsageBalance)
	if !ok {
		return false
	}
	_, asking := ub.Predicted()
	return asking
}
