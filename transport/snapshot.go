package transport

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/shoaldb/shoal/pb"
)

// SnapshotSource yields the range's pairs in key order; Next returns io.EOF at the end.
type SnapshotSource interface {
	Next() (*pb.KeyValue, error)
	Close() error
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// chunkCRC is the CRC32C over, for each kv in order, uvarint(len(key)) key uvarint(len(value)) value.
func chunkCRC(kvs []*pb.KeyValue) uint32 {
	var crc uint32
	var buf [binary.MaxVarintLen64]byte
	for _, kv := range kvs {
		n := binary.PutUvarint(buf[:], uint64(len(kv.Key)))
		crc = crc32.Update(crc, castagnoli, buf[:n])
		crc = crc32.Update(crc, castagnoli, kv.Key)
		n = binary.PutUvarint(buf[:], uint64(len(kv.Value)))
		crc = crc32.Update(crc, castagnoli, buf[:n])
		crc = crc32.Update(crc, castagnoli, kv.Value)
	}
	return crc
}

// verifyChunk checks a chunk's CRC against its kvs.
func verifyChunk(c *pb.SnapshotChunk) error {
	if got := chunkCRC(c.Kvs); got != c.Crc32C {
		return fmt.Errorf("crc32c mismatch: computed %08x, chunk carries %08x", got, c.Crc32C)
	}
	return nil
}

// SendSnapshot streams header then kv chunks to header.ToNode, rate limited; returns when the receiver
// answered (its handler's error, if any, is returned as an error). It always closes src. It uses a
// dedicated connection so a large snapshot never delays raft messages on the destination's stream.
func (t *Transport) SendSnapshot(ctx context.Context, header *pb.RaftMessage, src SnapshotSource) (err error) {
	defer func() {
		if cerr := src.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("transport: snapshot source close: %w", cerr)
		}
	}()
	if header == nil || header.ToNode == 0 {
		return errors.New("transport: snapshot header without destination node")
	}
	to := header.ToNode
	if t.isClosed() {
		return fmt.Errorf("transport: snapshot to node %d: transport closed", to)
	}
	if t.cfg.Resolver == nil {
		return fmt.Errorf("transport: snapshot to node %d: no resolver", to)
	}
	addr, ok := t.cfg.Resolver(to)
	if !ok {
		return fmt.Errorf("transport: snapshot to node %d: address unknown", to)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(t.ctx, cancel) // Close cancels in-flight snapshots
	defer stop()

	conn, err := grpc.NewClient(addr, t.dialOpts...)
	if err != nil {
		return fmt.Errorf("transport: snapshot to node %d at %s: dial: %w", to, addr, err)
	}
	defer conn.Close()
	stream, err := pb.NewRaftTransportClient(conn).Snapshot(ctx)
	if err != nil {
		return fmt.Errorf("transport: snapshot to node %d at %s: open stream: %w", to, addr, err)
	}

	chunk := &pb.SnapshotChunk{Header: header, ClusterId: t.clusterID()}
	payload := 0
	// send writes chunk; it returns done=true if the receiver already closed the stream (its answer
	// is then read by CloseAndRecv).
	send := func(final bool) (done bool, err error) {
		chunk.Final = final
		chunk.Crc32C = chunkCRC(chunk.Kvs)
		n := proto.Size(chunk)
		if err := t.limiter.wait(ctx, n); err != nil {
			return false, err
		}
		if err := stream.Send(chunk); err != nil {
			if errors.Is(err, io.EOF) {
				return true, nil
			}
			return false, err
		}
		t.stats.snapshotBytesSent.Add(uint64(n))
		// SendMsg has serialized the chunk; reuse it without the first chunk's header.
		clear(chunk.Kvs)
		chunk.Kvs = chunk.Kvs[:0]
		chunk.Header, chunk.ClusterId = nil, ""
		payload = 0
		return false, nil
	}

	for {
		kv, err := src.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("transport: snapshot to node %d at %s: reading source: %w", to, addr, err)
		}
		chunk.Kvs = append(chunk.Kvs, kv)
		payload += len(kv.Key) + len(kv.Value)
		if payload >= t.cfg.SnapshotChunkBytes {
			done, err := send(false)
			if err != nil {
				return fmt.Errorf("transport: snapshot to node %d at %s: send chunk: %w", to, addr, err)
			}
			if done {
				return t.snapshotAnswer(stream, to, addr)
			}
		}
	}
	if _, err := send(true); err != nil {
		return fmt.Errorf("transport: snapshot to node %d at %s: send final chunk: %w", to, addr, err)
	}
	return t.snapshotAnswer(stream, to, addr)
}

// snapshotAnswer closes the sending side and turns the receiver's answer into an error.
func (t *Transport) snapshotAnswer(stream pb.RaftTransport_SnapshotClient, to uint64, addr string) error {
	resp, err := stream.CloseAndRecv()
	if err != nil {
		return fmt.Errorf("transport: snapshot to node %d at %s: %w", to, addr, err)
	}
	if e := resp.GetError(); e != nil && e.Code != pb.ErrorCode_OK {
		return fmt.Errorf("transport: snapshot to node %d at %s rejected (%s): %s", to, addr, e.Code, e.Message)
	}
	t.stats.snapshotsSent.Add(1)
	return nil
}
