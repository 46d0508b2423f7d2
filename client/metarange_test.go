package client

import (
	"testing"

	"github.com/shoaldb/shoal/replica"
)

func TestMetaRangeIDMatchesReplica(t *testing.T) {
	if MetaRangeID != replica.MetaRangeID {
		t.Fatalf("client.MetaRangeID = %d, replica.MetaRangeID = %d", MetaRangeID, replica.MetaRangeID)
	}
}
