package transport

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"

	"github.com/shoaldb/shoal/pb"
)

// peer is the outbound side for one destination node: a queue and the single goroutine that owns the
// destination's connection and RaftStream.
type peer struct {
	t  *Transport
	id uint64
	q  chan *pb.RaftMessage
	// queued is the bytes (msgSize) of the messages in q, bounded by Config.QueueBytes.
	queued atomic.Int64
}

// took accounts for m leaving the queue.
func (p *peer) took(m *pb.RaftMessage) *pb.RaftMessage {
	p.queued.Add(-int64(msgSize(m)))
	return m
}

// run is the sender goroutine. It connects lazily when there is something to send, keeps the stream
// open while it is healthy and reconnects with exponential backoff after a failure.
func (p *peer) run() {
	defer p.t.wg.Done()
	ctx := p.t.ctx
	backoff := minBackoff
	for {
		var first *pb.RaftMessage
		select {
		case <-ctx.Done():
			return
		case first = <-p.q:
			p.took(first)
		}
		start := time.Now()
		err := p.session(first)
		if ctx.Err() != nil {
			return
		}
		_ = err // the error is reported through OnUnreachable; raft retries on its own.
		p.t.unreachable(p.id)
		p.drop()
		if time.Since(start) >= healthySession {
			backoff = minBackoff
		}
		if !sleepCtx(ctx, backoff) {
			return
		}
		backoff = min(backoff*2, maxBackoff)
	}
}

// drop discards everything currently queued.
func (p *peer) drop() {
	for {
		select {
		case m := <-p.q:
			p.took(m)
			p.t.stats.messagesDropped.Add(1)
		default:
			return
		}
	}
}

// session resolves the destination, opens a connection and a RaftStream and sends batches until the
// stream fails or the transport closes. first is the message that triggered the session; it is sent
// first or counted as dropped.
func (p *peer) session(first *pb.RaftMessage) (err error) {
	t := p.t
	pending := first
	defer func() {
		if pending != nil {
			t.stats.messagesDropped.Add(1)
		}
	}()

	addr, ok := t.cfg.Resolver(p.id)
	if !ok {
		return fmt.Errorf("transport: node %d: address unknown", p.id)
	}
	conn, err := grpc.NewClient(addr, t.dialOpts...)
	if err != nil {
		return fmt.Errorf("transport: node %d at %s: dial: %w", p.id, addr, err)
	}
	defer conn.Close()

	ctx, cancel := context.WithCancel(t.ctx)
	defer cancel()
	stream, err := pb.NewRaftTransportClient(conn).RaftStream(ctx)
	if err != nil {
		return fmt.Errorf("transport: node %d at %s: open raft stream: %w", p.id, addr, err)
	}

	// The receiver sends no acks; Recv only observes the stream's end (server rejection, connection loss).
	recvDone := make(chan struct{})
	var recvErr error
	go func() {
		defer close(recvDone)
		for {
			if _, err := stream.Recv(); err != nil {
				recvErr = err
				return
			}
		}
	}()
	defer func() {
		cancel()
		<-recvDone
	}()

	batch := &pb.RaftMessageBatch{ClusterId: t.clusterID(), FromNode: t.nodeID()}
	msgs := make([]*pb.RaftMessage, 0, maxBatchMessages)
	for {
		size := 0
		if pending != nil {
			msgs = append(msgs, pending)
			size += msgSize(pending)
			pending = nil
		} else {
			select {
			case m := <-p.q:
				msgs = append(msgs, p.took(m))
				size += msgSize(m)
			case <-recvDone:
				return fmt.Errorf("transport: node %d at %s: raft stream closed: %w", p.id, addr, streamErr(recvErr))
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		// Group batching: take everything already queued, up to the batch limits, in one stream write.
	fill:
		for len(msgs) < maxBatchMessages && size < maxBatchBytes {
			select {
			case m := <-p.q:
				msgs = append(msgs, p.took(m))
				size += msgSize(m)
			default:
				break fill
			}
		}
		batch.Messages = msgs
		err := stream.Send(batch) // SendMsg serializes before returning, so msgs can be reused.
		n := uint64(len(msgs))
		clear(msgs)
		msgs = msgs[:0]
		batch.Messages = nil
		if err != nil {
			t.stats.messagesDropped.Add(n)
			if errors.Is(err, io.EOF) { // the stream ended; the real status comes from Recv
				<-recvDone
				err = streamErr(recvErr)
			}
			return fmt.Errorf("transport: node %d at %s: send raft batch: %w", p.id, addr, err)
		}
		t.stats.batchesSent.Add(1)
		t.stats.messagesSent.Add(n)
	}
}

func streamErr(err error) error {
	if err == nil || errors.Is(err, io.EOF) {
		return errors.New("stream closed by receiver")
	}
	return err
}

// msgSize approximates a message's encoded size in a batch.
func msgSize(m *pb.RaftMessage) int { return len(m.Message) + 32 }
