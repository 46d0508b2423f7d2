package node

import "github.com/shoaldb/shoal/autopilot/policy"

// AutopilotPolicy returns the policy called name of the autopilot, if it runs on this node (the
// meta range's leader), else nil. For in-process experiments (package bench).
func (n *Node) AutopilotPolicy(name string) policy.Policy { return n.ap.Policy(name) }
