package model

import "bytes"

// LeadZone asks that the ranges within [Start, End) be led by a replica in Zone (a node's most
// specific locality tier, Node.Zone) whenever one of their voters is there. Both keys empty: the
// whole key space. Operators set it with `shoal admin zone-config`; it is kept in the meta range.
type LeadZone struct {
	Start, End []byte
	Zone       string
}

// Covers reports whether r lies wholly within the preference's span.
func (z LeadZone) Covers(r *Range) bool {
	if bytes.Compare(r.StartKey, z.Start) < 0 {
		return false
	}
	if len(z.End) == 0 {
		return true
	}
	return len(r.EndKey) > 0 && bytes.Compare(r.EndKey, z.End) <= 0
}

// LeadZoneOf is the zone r should be led in ("" when no preference covers it). When several
// cover it, the narrowest span wins: a table's preference overrides the cluster's.
func (c *Cluster) LeadZoneOf(r *Range) string {
	var best *LeadZone
	for i := range c.LeadZones {
		z := &c.LeadZones[i]
		if z.Zone == "" || !z.Covers(r) {
			continue
		}
		if best == nil || narrower(z, best) {
			best = z
		}
	}
	if best == nil {
		return ""
	}
	return best.Zone
}

// narrower reports whether a's span lies within b's and is not the same.
func narrower(a, b *LeadZone) bool {
	within := bytes.Compare(a.Start, b.Start) >= 0 &&
		(len(b.End) == 0 || len(a.End) > 0 && bytes.Compare(a.End, b.End) <= 0)
	same := bytes.Equal(a.Start, b.Start) && bytes.Equal(a.End, b.End)
	return within && !same
}

// LeadsOutsideZone reports whether moving r's leadership from one node to another takes it out of
// the zone r is to be led in: from is in that zone and to is not. The policies that move
// leaderships for balance check it, so that they never undo a preference.
func (c *Cluster) LeadsOutsideZone(r *Range, from, to uint64) bool {
	zone := c.LeadZoneOf(r)
	if zone == "" {
		return false
	}
	fn, tn := c.Node(from), c.Node(to)
	return fn != nil && tn != nil && fn.Zone() == zone && tn.Zone() != zone
}
