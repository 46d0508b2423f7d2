package main

import (
	"strings"
	"testing"
)

// TestStreamUsage: a missing job, an unknown job or mode and a bad batch size are usage errors
// (exit 2), reported before anything is sent.
func TestStreamUsage(t *testing.T) {
	for _, tc := range []struct {
		argv []string
		want string
	}{
		{[]string{"stream", "ingest"}, "0 argument(s) given"},
		{[]string{"stream", "ingest", "count", "--mode", "sideways"}, "want aligned, unaligned or placed"},
		{[]string{"stream", "ingest", "no-such-job"}, `no stream job "no-such-job"`},
		{[]string{"stream", "ingest", "count", "--batch", "0"}, "--batch 0"},
		{[]string{"stream", "status", "extra"}, "1 argument(s) given"},
	} {
		code, _, errOut := shoal(t, append([]string{"--host", "127.0.0.1:1"}, tc.argv...)...)
		if code != 2 || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", tc.argv, code, errOut, tc.want)
		}
	}
}
