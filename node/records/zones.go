package records

import (
	"context"
	"encoding/binary"
	"fmt"

	"github.com/shoaldb/shoal/autopilot/model"
	"github.com/shoaldb/shoal/pb"
)

// leadZonePrefix keys the leadership zone preferences: one key per span, 'z', the span's start as a
// length-prefixed string, then its end.
const leadZonePrefix = 'z'

// LeadZoneKey is the meta key of the preference for [start, end).
func LeadZoneKey(start, end []byte) []byte {
	k := binary.AppendUvarint([]byte{leadZonePrefix}, uint64(len(start)))
	k = append(k, start...)
	return append(k, end...)
}

// SetLeadZone stores the zone the ranges within [start, end) are to be led in; an empty zone deletes
// the span's preference.
func SetLeadZone(ctx context.Context, m MetaStore, z model.LeadZone) error {
	mut := &pb.Mutation{Key: LeadZoneKey(z.Start, z.End), Value: []byte(z.Zone)}
	if z.Zone == "" {
		mut = &pb.Mutation{Key: mut.Key, Delete: true}
	}
	if _, err := m.ProposeMeta(ctx, &pb.Command{Mutations: []*pb.Mutation{mut}}); err != nil {
		return fmt.Errorf("store the leadership zone of %s: %w", model.FormatSpan(z.Start, z.End), err)
	}
	return nil
}

// LeadZones reads every leadership zone preference, in key order (a malformed key is skipped).
func LeadZones(ctx context.Context, m MetaStore) ([]model.LeadZone, error) {
	kvs, err := m.ScanMeta(ctx, []byte{leadZonePrefix}, []byte{leadZonePrefix + 1}, 0)
	if err != nil {
		return nil, fmt.Errorf("read the leadership zone preferences from the meta range: %w", err)
	}
	var out []model.LeadZone
	for _, kv := range kvs {
		rest := kv.Key[1:]
		n, w := binary.Uvarint(rest)
		if w <= 0 || uint64(len(rest)-w) < n {
			continue
		}
		rest = rest[w:]
		out = append(out, model.LeadZone{Start: rest[:n:n], End: rest[n:], Zone: string(kv.Value)})
	}
	return out, nil
}
