package operator

import (
	"fmt"
	"time"

	"github.com/shoaldb/shoal/autopilot/model"
)

// KindSetProfile is the operator that changes one node's engine profile.
const KindSetProfile = "set-profile"

// SetProfile changes the engine profile of Node to Profile (storage presets: read, write,
// readwrite, scan, default). The node does it by a rolling restart in process: it sheds its
// leaderships, reopens its engine with the profile on the same data, warms its cache from its
// peers' read hints and takes its leaderships back (docs/design/profiles.md).
//
// It is a step on a node, not on its range: the operator carrying it names one range the node holds
// (the executor runs one operator per range), and the step is finished when the node's heartbeats
// report the profile, whatever the range looks like (ClusterStep).
type SetProfile struct {
	Node    uint64
	Profile string
}

// ClusterStep is a step whose effect shows on the cluster rather than on the operator's range: the
// executor asks IsFinishedIn instead of IsFinished.
type ClusterStep interface {
	IsFinishedIn(c *model.Cluster) bool
}

// Finished reports whether s is done as c shows it (r is the operator's range in c).
func Finished(s Step, c *model.Cluster, r *model.Range) bool {
	if cs, ok := s.(ClusterStep); ok {
		return cs.IsFinishedIn(c)
	}
	return s.IsFinished(r)
}

// ProfileRestart is how long a profile change may take: shedding the leaderships, closing and
// reopening the engine, warming the cache and taking the leaderships back.
const ProfileRestart = time.Minute

// Kind implements Step.
func (SetProfile) Kind() string { return KindSetProfile }

// String implements Step.
func (s SetProfile) String() string { return fmt.Sprintf("set-profile n%d %s", s.Node, s.Profile) }

// IsFinished implements Step: a range never shows a node's profile (see IsFinishedIn).
func (SetProfile) IsFinished(*model.Range) bool { return false }

// IsFinishedIn implements ClusterStep: the node reports the profile and is live again.
func (s SetProfile) IsFinishedIn(c *model.Cluster) bool {
	n := c.Node(s.Node)
	return n != nil && n.Live && n.Profile == s.Profile
}

// Check implements Step: the node must still belong to the cluster. A node silent for a moment is
// expected (it is restarting), so liveness is not required.
func (s SetProfile) Check(c *model.Cluster, r *model.Range) error {
	n := c.Node(s.Node)
	switch {
	case n == nil:
		return fmt.Errorf("n%d left the cluster", s.Node)
	case n.Decommissioned || n.Decommissioning:
		return fmt.Errorf("n%d is leaving the cluster", s.Node)
	}
	return nil
}

// Apply implements Step: the range is unchanged.
func (SetProfile) Apply(r *model.Range) *model.Range { return cloneRange(r) }

// Influence implements Step: the node's leaderships leave for the restart and come back, so its
// load does not change for planning.
func (SetProfile) Influence(*model.Range, Influence) {}

// Timeout implements Step.
func (SetProfile) Timeout(*model.Range, Timeouts) time.Duration { return ProfileRestart }

// NewSetProfile changes node's profile to profile; r is a range with a replica on node, which the
// operator occupies while the node restarts.
func NewSetProfile(policy string, now time.Time, r *model.Range, node uint64, profile, reason string) *Operator {
	return New(KindSetProfile, policy, now, r, reason, SetProfile{Node: node, Profile: profile})
}
