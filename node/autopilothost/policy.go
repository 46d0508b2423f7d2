package autopilothost

import "github.com/shoaldb/shoal/autopilot/policy"

// Policy returns the policy called name of the autopilot running on this node (nil when it runs
// elsewhere, or has no such policy). In-process experiments use it to set a policy's mode; the
// policy's own methods say which are safe to call from another goroutine.
func (h *Host) Policy(name string) policy.Policy {
	ap := h.running()
	if ap == nil {
		return nil
	}
	return ap.Policies().Policy(name)
}
