package transport

import (
	"context"
	"io"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/shoaldb/shoal/pb"
)

// Fuzz targets for the receiving side of the transport: the RaftStream and Snapshot handlers fed with
// decoded messages through in-memory streams (no network, no gRPC server). gRPC rejects a message that
// does not decode before the handler sees it, so an undecodable input ends the stream there.

// fakeStream is an in-memory grpc server stream delivering reqs in order, then io.EOF.
type fakeStream[Req, Resp any] struct {
	grpc.ServerStream // nil: only the methods below are called
	ctx               context.Context
	reqs              []*Req
	sent              []*Resp
	closed            *Resp
}

func (s *fakeStream[Req, Resp]) Context() context.Context { return s.ctx }

func (s *fakeStream[Req, Resp]) Recv() (*Req, error) {
	if len(s.reqs) == 0 {
		return nil, io.EOF
	}
	r := s.reqs[0]
	s.reqs = s.reqs[1:]
	return r, nil
}

func (s *fakeStream[Req, Resp]) Send(r *Resp) error {
	s.sent = append(s.sent, r)
	return nil
}

func (s *fakeStream[Req, Resp]) SendAndClose(r *Resp) error {
	s.closed = r
	return nil
}

var (
	_ pb.RaftTransport_RaftStreamServer = (*fakeStream[pb.RaftMessageBatch, pb.RaftStreamAck])(nil)
	_ pb.RaftTransport_SnapshotServer   = (*fakeStream[pb.SnapshotChunk, pb.SnapshotResponse])(nil)
)

// decodeAll decodes each non-empty input as a T, stopping at the first that does not decode.
func decodeAll[T any, PT interface {
	*T
	proto.Message
}](inputs ...[]byte) []*T {
	var out []*T
	for _, b := range inputs {
		if len(b) == 0 {
			continue
		}
		m := PT(new(T))
		if err := proto.Unmarshal(b, m); err != nil {
			break
		}
		out = append(out, (*T)(m))
	}
	return out
}

func marshalOrDie(m proto.Message) []byte {
	b, err := proto.Marshal(m)
	if err != nil {
		panic(err)
	}
	return b
}

// FuzzRaftStream feeds up to three arbitrary RaftMessageBatch messages to the RaftStream handler of a
// transport of node 1 in cluster "c1" (or of a node without identity yet). It must not panic, and it
// must deliver exactly the messages of the batches before the first one it refuses (wrong cluster,
// message for another node), in order.
func FuzzRaftStream(f *testing.F) {
	msg := func(to uint64) *pb.RaftMessage {
		return &pb.RaftMessage{RangeId: 2, FromNode: 2, ToNode: to, Message: []byte("\x08\x08\x10\x01\x18\x02")}
	}
	ok := marshalOrDie(&pb.RaftMessageBatch{ClusterId: "c1", FromNode: 2, Messages: []*pb.RaftMessage{msg(1), msg(1)}})
	f.Add(ok, []byte(nil), []byte(nil), true)
	f.Add(ok, marshalOrDie(&pb.RaftMessageBatch{FromNode: 2}), ok, true)                                                        // empty batch, no cluster id
	f.Add(ok, marshalOrDie(&pb.RaftMessageBatch{ClusterId: "c2", FromNode: 2, Messages: []*pb.RaftMessage{msg(1)}}), ok, true)  // other cluster
	f.Add(ok, marshalOrDie(&pb.RaftMessageBatch{ClusterId: "c1", FromNode: 2, Messages: []*pb.RaftMessage{msg(3)}}), ok, true)  // misrouted
	f.Add(marshalOrDie(&pb.RaftMessageBatch{ClusterId: "c1", FromNode: 2, Messages: []*pb.RaftMessage{msg(3)}}), ok, ok, false) // no identity: anything goes
	f.Add([]byte("\xff\xff\xff"), ok, []byte(nil), true)

	f.Fuzz(func(t *testing.T, b1, b2, b3 []byte, identity bool) {
		batches := decodeAll[pb.RaftMessageBatch](b1, b2, b3)
		cfg := Config{}
		if identity {
			cfg.NodeID, cfg.ClusterID = 1, "c1"
		}
		rec := newRecorder()
		tr := New(cfg, rec)
		defer tr.Close()
		stream := &fakeStream[pb.RaftMessageBatch, pb.RaftStreamAck]{ctx: context.Background(), reqs: batches}
		err := (&server{t: tr}).RaftStream(stream)

		// What the handler must have delivered: every batch up to the first refused one.
		var want []*pb.RaftMessage
		refused := false
		for _, b := range batches {
			if identity && b.ClusterId != "" && b.ClusterId != "c1" {
				refused = true
				break
			}
			for _, m := range b.Messages {
				if identity && m.ToNode != 1 {
					refused = true
				}
			}
			if refused {
				break
			}
			want = append(want, b.Messages...)
		}
		if refused != (err != nil) {
			t.Fatalf("RaftStream returned %v; a refusal was expected: %v", err, refused)
		}
		got := rec.messages()
		if len(got) != len(want) {
			t.Fatalf("delivered %d messages, want %d", len(got), len(want))
		}
		for i := range want {
			if !proto.Equal(got[i], want[i]) {
				t.Fatalf("message %d delivered as %v, want %v", i, got[i], want[i])
			}
		}
	})
}

// FuzzSnapshotStream feeds up to three arbitrary SnapshotChunk messages to the Snapshot handler (with
// the snapshot size limit lowered to 4 KiB). With fixCRC the harness first sets each chunk's CRC to
// the right value, so that inputs get past the integrity check. It must not panic, must hand the
// handler only a snapshot that has a header, ends with a final chunk and has only CRC-valid chunks,
// and must answer every stream (an error or a response).
func FuzzSnapshotStream(f *testing.F) {
	old := maxSnapshotBytes
	maxSnapshotBytes = 4 << 10
	f.Cleanup(func() { maxSnapshotBytes = old })

	header := &pb.RaftMessage{RangeId: 3, FromNode: 2, ToNode: 1, Message: []byte("\x08\x07\x10\x02\x18\x01")}
	kvs := []*pb.KeyValue{{Key: []byte("a"), Value: []byte("1")}, {Key: []byte("b"), Value: []byte("2")}}
	first := &pb.SnapshotChunk{Header: header, ClusterId: "c1", Kvs: kvs, Crc32C: chunkCRC(kvs)}
	final := &pb.SnapshotChunk{Kvs: kvs[:1], Crc32C: chunkCRC(kvs[:1]), Final: true}
	whole := proto.Clone(first).(*pb.SnapshotChunk)
	whole.Final = true
	f.Add(marshalOrDie(whole), []byte(nil), []byte(nil), false)
	f.Add(marshalOrDie(first), marshalOrDie(final), []byte(nil), false)
	f.Add(marshalOrDie(first), []byte(nil), []byte(nil), false)                                                  // no final chunk
	f.Add(marshalOrDie(final), []byte(nil), []byte(nil), false)                                                  // no header
	f.Add(marshalOrDie(&pb.SnapshotChunk{Header: header, Kvs: kvs, Crc32C: 7}), []byte(nil), []byte(nil), false) // bad CRC
	f.Add(marshalOrDie(&pb.SnapshotChunk{Header: header, ClusterId: "c2", Final: true}), []byte(nil), []byte(nil), false)
	big := &pb.SnapshotChunk{Header: header, Kvs: []*pb.KeyValue{{Key: []byte("k"), Value: make([]byte, 5<<10)}}, Final: true}
	f.Add(marshalOrDie(big), []byte(nil), []byte(nil), true) // over the size limit

	f.Fuzz(func(t *testing.T, c1, c2, c3 []byte, fixCRC bool) {
		chunks := decodeAll[pb.SnapshotChunk](c1, c2, c3)
		if fixCRC {
			for _, c := range chunks {
				c.Crc32C = chunkCRC(c.Kvs)
			}
		}
		rec := newRecorder()
		tr := New(Config{NodeID: 1, ClusterID: "c1"}, rec)
		defer tr.Close()
		stream := &fakeStream[pb.SnapshotChunk, pb.SnapshotResponse]{ctx: context.Background(), reqs: append([]*pb.SnapshotChunk(nil), chunks...)}
		err := (&server{t: tr}).Snapshot(stream)
		if err == nil && stream.closed == nil {
			t.Fatalf("Snapshot returned no error and sent no response")
		}
		rec.mu.Lock()
		snaps := rec.snaps
		rec.mu.Unlock()
		if len(snaps) == 0 {
			return
		}
		if len(snaps) > 1 || err != nil {
			t.Fatalf("%d snapshots delivered, stream error %v", len(snaps), err)
		}
		if len(chunks) == 0 || chunks[0].Header == nil || !proto.Equal(snaps[0].header, chunks[0].Header) {
			t.Fatalf("delivered header %v, first chunk %v", snaps[0].header, chunks)
		}
		var want []*pb.KeyValue
		ended := false
		for _, c := range chunks {
			if verifyChunk(c) != nil {
				t.Fatalf("a chunk with a bad CRC reached the handler: %v", c)
			}
			want = append(want, c.Kvs...)
			if c.Final {
				ended = true
				break
			}
		}
		if !ended {
			t.Fatalf("a snapshot without a final chunk reached the handler")
		}
		if len(snaps[0].kvs) != len(want) {
			t.Fatalf("delivered %d pairs, want %d", len(snaps[0].kvs), len(want))
		}
		total := 0
		for i := range want {
			if !proto.Equal(snaps[0].kvs[i], want[i]) {
				t.Fatalf("pair %d delivered as %v, want %v", i, snaps[0].kvs[i], want[i])
			}
			total += len(want[i].Key) + len(want[i].Value)
		}
		if int64(total) > maxSnapshotBytes {
			t.Fatalf("a snapshot of %d bytes passed the %d-byte limit", total, maxSnapshotBytes)
		}
	})
}
