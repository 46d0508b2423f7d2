package hints

import (
	"context"
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	grpcproto "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
)

// A batch is encoded once, not once per peer. With hints to every replica each range's hints go to
// two peers or more, and building protobuf messages and encoding them per peer (a size pass and a
// marshal pass each, plus the shipper's own size pass) was about a sixth of a drain's work, next to
// the hot-key summary and summarizing (BenchmarkCaptureShipAll's profile). The shipper encodes each
// range once, directly with protowire (package hint's EncodeRange), lays the encodings out per peer
// as HintBatch.ranges entries, and at send time appends the few per-send fields (from_node,
// cluster_id, queued_micros). rawCodec hands such an encoding to gRPC as is; the receiver decodes an
// ordinary HintBatch.

// wireBatch is a complete HintBatch encoding.
type wireBatch []byte

// wireSender is a Sender that also sends batches already encoded (StreamSender, GRPCSender).
type wireSender interface {
	Sender
	// sendWire sends w, a HintBatch's encoding.
	sendWire(ctx context.Context, to uint64, w wireBatch) error
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
