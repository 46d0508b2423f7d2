package policy

import (
	"github.com/shoaldb/shoal/autopilot/model"
	"github.com/shoaldb/shoal/autopilot/operator"
)

// ReadHints proposes nothing: read hints are not operators but a mechanism of every node (leaders
// record the reads they serve, the other replicas replay them to keep their caches warm). The policy
// exists to carry the mechanism's cluster-wide switch, `shoal admin policy set read_hints on|off`:
// on (the default), nodes record and ship hints and the executor's leadership transfers first wait
// (bounded) for the target's cache to be warm; off, nodes stop recording reads and transfers do not
// wait. Nodes read the switch from the meta range every couple of seconds; the autopilot reads it
// from its registry.
type ReadHints struct{}

// NewReadHints returns the read_hints switch.
func NewReadHints() *ReadHints { return &ReadHints{} }

// Name implements Policy.
func (*ReadHints) Name() string { return NameReadHints }

// Propose implements Policy: nothing to propose.
func (*ReadHints) Propose(*model.Cluster, []*operator.Operator) []*operator.Operator { return nil }
