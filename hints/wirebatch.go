package hints

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	grpcproto "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
)

// A batch is encoded once, not once per peer. With hints to every replica each range's hints go to
// two peers or more, and building protobuf messages and encoding them per peer (a size pass and a
// marshal pass each, plus the shipper's own size pass) was about a sixth of a drain's work, next to
// the hot-key summary and summarizing (BenchmarkCaptureShipAll's profile). The shipper encodes each
// range once, directly with protowire, lays the encodings out
// per peer as HintBatch.ranges entries, and at send time appends the few per-send fields
// (from_node, cluster_id, queued_micros): protobuf fields may come in any order. rawCodec hands
// such an encoding to gRPC as is; the receiver decodes an ordinary HintBatch.

// wireBatch is a complete HintBatch encoding.
type wireBatch []byte

// wireSender is a Sender that also sends batches already encoded (StreamSender, GRPCSender).
type wireSender interface {
	Sender
	// sendWire sends w, a HintBatch's encoding.
	sendWire(ctx context.Context, to uint64, w wireBatch) error
}

// encodeRange encodes r as a pb.RangeHints message, its age measured at now: the encoding
// proto.Marshal gives rangeHintsToProto(r, now) (zero fields omitted), written directly, without
// building the messages (TestEncodeRangeMatchesProto).
func encodeRange(r RangeHints, now time.Time) []byte {
	age := rangeAgeMicros(r, now)
	n := 0
	if r.RangeID != 0 {
		n += 1 + protowire.SizeVarint(r.RangeID)
	}
	if age != 0 {
		n += 1 + protowire.SizeVarint(age)
	}
	for i := range r.Hints {
		n += 1 + protowire.SizeBytes(readHintSize(&r.Hints[i]))
	}
	b := make([]byte, 0, n)
	if r.RangeID != 0 {
		b = protowire.AppendTag(b, 1, protowire.VarintType)
		b = protowire.AppendVarint(b, r.RangeID)
	}
	if age != 0 {
		b = protowire.AppendTag(b, 2, protowire.VarintType)
		b = protowire.AppendVarint(b, age)
	}
	for i := range r.Hints {
		h := &r.Hints[i]
		b = protowire.AppendTag(b, 3, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(readHintSize(h)))
		b = appendReadHint(b, h)
	}
	return b
}

// readHintSize is the size of h encoded as a pb.ReadHint (HintToProto(h)).
func readHintSize(h *Hint) int {
	n := 0
	if len(h.Key) > 0 {
		n += 1 + protowire.SizeBytes(len(h.Key))
	}
	if len(h.End) > 0 {
		n += 1 + protowire.SizeBytes(len(h.End))
	}
	if h.Limit != 0 {
		n += 1 + protowire.SizeVarint(uint64(h.Limit))
	}
	if h.Scan {
		n += 2
	}
	if h.Reverse {
		n += 2
	}
	if h.Count != 0 {
		n += 1 + protowire.SizeVarint(uint64(h.Count))
	}
	return n
}

// appendReadHint appends h encoded as a pb.ReadHint (fields in number order, as proto.Marshal).
func appendReadHint(b []byte, h *Hint) []byte {
	if len(h.Key) > 0 {
		b = protowire.AppendTag(b, 1, protowire.BytesType)
		b = protowire.AppendBytes(b, h.Key)
	}
	if len(h.End) > 0 {
		b = protowire.AppendTag(b, 2, protowire.BytesType)
		b = protowire.AppendBytes(b, h.End)
	}
	if h.Limit != 0 {
		b = protowire.AppendTag(b, 3, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(h.Limit))
	}
	if h.Scan {
		b = protowire.AppendTag(b, 4, protowire.VarintType)
		b = protowire.AppendVarint(b, 1)
	}
	if h.Reverse {
		b = protowire.AppendTag(b, 5, protowire.VarintType)
		b = protowire.AppendVarint(b, 1)
	}
	if h.Count != 0 {
		b = protowire.AppendTag(b, 6, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(h.Count))
	}
	return b
}

// appendRangeEntry appends an encoded range message as a HintBatch.ranges entry.
func appendRangeEntry(dst, rangeMsg []byte) []byte {
	dst = protowire.AppendTag(dst, 3, protowire.BytesType)
	return protowire.AppendBytes(dst, rangeMsg)
}

// batchTrailerMax bounds the bytes appendBatchTrailer adds beyond the cluster id's: three one-byte
// tags, two varints of at most 10 bytes and the id's length varint (at most 10).
const batchTrailerMax = 3 + 3*10

// appendBatchTrailer appends HintBatch's per-send fields to an encoding of its ranges.
func appendBatchTrailer(dst []byte, from uint64, clusterID string, queuedMicros uint64) wireBatch {
	if from != 0 {
		dst = protowire.AppendTag(dst, 1, protowire.VarintType)
		dst = protowire.AppendVarint(dst, from)
	}
	if clusterID != "" {
		dst = protowire.AppendTag(dst, 2, protowire.BytesType)
		dst = protowire.AppendString(dst, clusterID)
	}
	if queuedMicros != 0 {
		dst = protowire.AppendTag(dst, 4, protowire.VarintType)
		dst = protowire.AppendVarint(dst, queuedMicros)
	}
	return dst
}

// rawCodec is gRPC's proto codec that passes a wireBatch through unencoded. Its name is "proto", so
// the peer decodes with its ordinary proto codec. It is forced on the hint calls only
// (grpc.ForceCodecV2, an experimental gRPC API: if it goes, the shipper falls back to per-peer
// encoding by not implementing wireSender).
type rawCodec struct{}

func (rawCodec) Name() string { return grpcproto.Name }

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	if w, ok := v.(wireBatch); ok {
		return mem.BufferSlice{mem.SliceBuffer(w)}, nil
	}
	c, err := protoCodec()
	if err != nil {
		return nil, err
	}
	return c.Marshal(v)
}

func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	c, err := protoCodec()
	if err != nil {
		return err
	}
	return c.Unmarshal(data, v)
}

// protoCodec is gRPC's registered proto codec. Importing grpcproto registers it, so the error is a
// guard, not an expected path; the lookup per call is a map read, once per batch and peer (~11 a
// second at the 90-ms interval).
func protoCodec() (encoding.CodecV2, error) {
	c := encoding.GetCodecV2(grpcproto.Name)
	if c == nil {
		return nil, fmt.Errorf("hints: gRPC has no %q codec registered", grpcproto.Name)
	}
	return c, nil
}

// rawCall makes a hint call send a wireBatch as is.
var rawCall = grpc.ForceCodecV2(rawCodec{})
