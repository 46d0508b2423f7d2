package kv

import (
	"context"
	"testing"

	"google.golang.org/grpc/metadata"

	"github.com/shoaldb/shoal/storage"
)

// TestReadSource: a context JobRead (PrefetchRead) marked reads as the jobs' (prefetch's) on this node, and so does the metadata
// it sends to the node a read is forwarded to; any other read is the foreground's.
func TestReadSource(t *testing.T) {
	ctx := context.Background()
	if got := readSource(ctx); got != storage.ReadForeground {
		t.Fatalf("an unmarked read: %v", got)
	}
	job := JobRead(ctx)
	if got := readSource(job); got != storage.ReadJobs {
		t.Fatalf("a marked read served here: %v", got)
	}
	out, _ := metadata.FromOutgoingContext(markForwarded(job))
	if got := readSource(metadata.NewIncomingContext(ctx, out)); got != storage.ReadJobs {
		t.Fatalf("a marked read forwarded (metadata %v): %v", out, got)
	}
	pre := PrefetchRead(job)
	if got := readSource(pre); got != storage.ReadPrefetch {
		t.Fatalf("a prefetch served here: %v", got)
	}
	out, _ = metadata.FromOutgoingContext(markForwarded(pre))
	if got := readSource(metadata.NewIncomingContext(ctx, out)); got != storage.ReadPrefetch {
		t.Fatalf("a prefetch forwarded (metadata %v): %v", out, got)
	}
	out, _ = metadata.FromOutgoingContext(markForwarded(ctx))
	if got := readSource(metadata.NewIncomingContext(ctx, out)); got != storage.ReadForeground {
		t.Fatalf("an unmarked read forwarded: %v", got)
	}
}
