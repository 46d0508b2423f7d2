package benchutil

import (
	"encoding/binary"
	"fmt"
	"hash/crc64"

	"github.com/shoaldb/shoal/replica"
)

// ReplicaDigest is one replica's copy of a range, read from its local state machine: comparing
// the digests of a range's replicas at one applied index checks that they hold the same data.
type ReplicaDigest struct {
	Node    uint64 `json:"node"`
	Applied uint64 `json:"applied_index"`
	Keys    int64  `json:"keys"`
	Bytes   int64  `json:"bytes"`
	CRC64   string `json:"crc64"`
	Error   string `json:"error,omitempty"`
}

var crcTable = crc64.MakeTable(crc64.ECMA)

// Digest reads every pair of the replica's local copy, page by page, and checksums keys and values.
func Digest(node uint64, r *replica.Replica) ReplicaDigest {
	d := ReplicaDigest{Node: node, Applied: r.Status().Applied}
	h := crc64.New(crcTable)
	var start []byte
	for {
		kvs, _, truncated, err := r.Scan(start, nil, 4096, 0, false)
		if err != nil {
			d.Error = err.Error()
			return d
		}
		for _, p := range kvs {
			h.Write(binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32(nil, uint32(len(p.Key))), uint32(len(p.Value))))
			h.Write(p.Key)
			h.Write(p.Value)
			d.Keys, d.Bytes = d.Keys+1, d.Bytes+int64(len(p.Key)+len(p.Value))
		}
		if !truncated || len(kvs) == 0 {
			break
		}
		start = append(append([]byte(nil), kvs[len(kvs)-1].Key...), 0)
	}
	d.CRC64 = fmt.Sprintf("%016x", h.Sum64())
	if a := r.Status().Applied; a != d.Applied {
		d.Error = fmt.Sprintf("applied index moved from %d to %d during the scan", d.Applied, a)
	}
	return d
}
