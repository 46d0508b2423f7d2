package ycsb

import (
	"strings"
	"testing"
)

// A run with failed operations gets an Errors column, and the document says nothing failed only when
// nothing did.
func TestCompareShowsErrors(t *testing.T) {
	ops := map[string]OpStats{OpRead: {Count: 10, Errors: 2, P99Ms: 3}}
	doc := Compare([]*Report{{Workload: "c", System: "shoal", Target: TargetGRPC, Throughput: 100, Errors: 2, Operations: ops},
		{Workload: "c", System: "etcd", Target: TargetEtcd, Throughput: 50, Operations: map[string]OpStats{OpRead: {Count: 10, P99Ms: 4}}}}, CompareOptions{})
	if strings.Contains(doc, "No operation failed") || !strings.Contains(doc, "| Errors |") || !strings.Contains(doc, "| C | shoal (grpc) | 100 | 3.00 | 2 | 2.00× |") {
		t.Fatalf("document:\n%s", doc)
	}
}
