package expiry_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/shoaldb/shoal/node"
	"github.com/shoaldb/shoal/node/expiry"
	"github.com/shoaldb/shoal/storage"
	"github.com/shoaldb/shoal/test/testcluster"
)

// TestSweeper: on a one-node cluster the sweeper deletes expired keys from the engine and leaves
// live ones; switched off, it deletes nothing.
func TestSweeper(t *testing.T) {
	for _, off := range []bool{false, true} {
		t.Run(fmt.Sprintf("off=%v", off), func(t *testing.T) {
			c := testcluster.StartSafe(t, testcluster.Options{Nodes: 1, Node: node.Config{Expiry: expiry.Config{Interval: 100 * time.Millisecond, Off: off}}})
			cl := c.Client()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			for i := 0; i < 50; i++ {
				if err := cl.PutTTL(ctx, fmt.Appendf(nil, "e%02d", i), []byte("v"), 200*time.Millisecond); err != nil {
					t.Fatal(err)
				}
			}
			if err := cl.Put(ctx, []byte("live"), []byte("v")); err != nil {
				t.Fatal(err)
			}
			eng := c.Nodes[0].Eng
			stored := func(k string) bool {
				_, found, err := eng.Get(storage.UserDataKey([]byte(k)))
				if err != nil {
					t.Fatal(err)
				}
				return found
			}
			if off {
				time.Sleep(600 * time.Millisecond)
				if st := c.Nodes[0].Node.ExpiryStats(); st.Deleted != 0 || st.Passes != 0 || !stored("e00") {
					t.Fatalf("a switched-off sweeper worked: %+v", st)
				}
				return
			}
			testcluster.WaitFor(t, 10*time.Second, "expired keys deleted", func() bool {
				for i := 0; i < 50; i++ {
					if stored(fmt.Sprintf("e%02d", i)) {
						return false
					}
				}
				return true
			})
			if !stored("live") {
				t.Fatal("the sweeper deleted a key without expiry")
			}
			if st := c.Nodes[0].Node.ExpiryStats(); st.Deleted != 50 || st.Scanned == 0 {
				t.Fatalf("stats %+v, want 50 deleted", st)
			}
		})
	}
}

// TestSweeperSkipsUnchangedRanges: a range without writes since its last sweep and without a key
// due to expire is not read again; a write makes the next pass read it, and a key given a TTL then
// is still deleted.
func TestSweeperSkipsUnchangedRanges(t *testing.T) {
	c := testcluster.StartSafe(t, testcluster.Options{Nodes: 1, Node: node.Config{Expiry: expiry.Config{Interval: 50 * time.Millisecond}}})
	cl := c.Client()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := 0; i < 100; i++ {
		if err := cl.Put(ctx, fmt.Appendf(nil, "k%03d", i), []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	n := c.Nodes[0].Node
	// Skips counted before the writes were applied do not count: the first pass to start after them
	// reads the range, and only the skips after it show that it is not read again.
	written := n.ExpiryStats()
	testcluster.WaitFor(t, 10*time.Second, "passes skipping the unchanged range", func() bool { return n.ExpiryStats().Skipped >= written.Skipped+5 })
	st := n.ExpiryStats()
	testcluster.WaitFor(t, 10*time.Second, "five more passes", func() bool { return n.ExpiryStats().Passes >= st.Passes+5 })
	if now := n.ExpiryStats(); now.Scanned != st.Scanned {
		t.Fatalf("an unchanged range was read again: %d values scanned, then %d", st.Scanned, now.Scanned)
	}
	if err := cl.PutTTL(ctx, []byte("k050"), []byte("v"), 100*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	testcluster.WaitFor(t, 10*time.Second, "the key given a TTL deleted", func() bool { return n.ExpiryStats().Deleted == 1 })
	if now := n.ExpiryStats(); now.Scanned <= st.Scanned {
		t.Fatalf("the range written since was not read again: %d values scanned", now.Scanned)
	}
}
