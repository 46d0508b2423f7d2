package hint

import (
	"time"

	"google.golang.org/protobuf/encoding/protowire"
)

// The direct encoding of a batch, so that it is encoded once and not once per peer: the shipper
// encodes each range once (EncodeRange), lays the encodings out per peer as HintBatch.ranges entries
// (AppendRangeEntry), and at send time appends the few per-send fields (AppendBatchTrailer).

// EncodeRange encodes r as a pb.RangeHints message, its age measured at now: the encoding
// proto.Marshal gives RangeToProto(r, now) (zero fields omitted), written directly, without
// building the messages (TestEncodeRangeMatchesProto).
func EncodeRange(r RangeHints, now time.Time) []byte {
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

// AppendRangeEntry appends an encoded range message (EncodeRange) as a HintBatch.ranges entry.
func AppendRangeEntry(dst, rangeMsg []byte) []byte {
	dst = protowire.AppendTag(dst, 3, protowire.BytesType)
	return protowire.AppendBytes(dst, rangeMsg)
}

// BatchTrailerMax bounds the bytes AppendBatchTrailer adds beyond the cluster id's: three one-byte
// tags, two varints of at most 10 bytes and the id's length varint (at most 10).
const BatchTrailerMax = 3 + 3*10

// AppendBatchTrailer appends HintBatch's per-send fields to an encoding of its ranges (entries
// appended by AppendRangeEntry): protobuf fields may come in any order, so the result is a complete
// HintBatch.
func AppendBatchTrailer(dst []byte, from uint64, clusterID string, queuedMicros uint64) []byte {
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
