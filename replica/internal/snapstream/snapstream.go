// Package snapstream reads one range's data out of an engine snapshot as the stream of key-values a
// raft snapshot carries to another node (transport.SnapshotSource). It owns the iteration and its
// single close; it must never write to the engine nor decide what span a range covers.
package snapstream

import (
	"io"

	"github.com/shoaldb/shoal/pb"
	"github.com/shoaldb/shoal/storage"
)

// Source streams the data keys of [lo, hi) of an engine snapshot, their keyspace prefix stripped.
type Source struct{ it *storage.Iterator }

// New positions a Source at the first key of [lo, hi).
func New(snap *storage.Snapshot, lo, hi []byte) (*Source, error) {
	it, err := snap.NewStreamIter(lo, hi)
	if err != nil {
		return nil, err
	}
	it.First()
	return &Source{it: it}, nil
}

// Next implements transport.SnapshotSource: the next key-value (copied), or io.EOF.
func (s *Source) Next() (*pb.KeyValue, error) {
	if !s.it.Valid() {
		if err := s.it.Error(); err != nil {
			return nil, err
		}
		return nil, io.EOF
	}
	kv := &pb.KeyValue{Key: append([]byte(nil), storage.StripDataPrefix(s.it.Key())...), Value: append([]byte(nil), s.it.Value()...)}
	s.it.Next()
	return kv, nil
}

// Close implements transport.SnapshotSource. It is idempotent: closing a Pebble iterator twice
// would corrupt whichever iterator reused its pooled memory.
func (s *Source) Close() error {
	if s.it == nil {
		return nil
	}
	it := s.it
	s.it = nil
	return it.Close()
}
