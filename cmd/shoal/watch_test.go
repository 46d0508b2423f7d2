package main

import (
	"strings"
	"testing"
)

// TestWatchUsage: arguments that do not name one span are usage errors (exit 2), caught before any
// connection.
func TestWatchUsage(t *testing.T) {
	for _, tc := range []struct {
		argv []string
		want string
	}{
		{[]string{"watch"}, "one PREFIX"},
		{[]string{"watch", "a", "b"}, "one PREFIX"},
		{[]string{"watch", "--span", "a"}, "one PREFIX"},
		{[]string{"changefeed", "--table", "users", "extra"}, "takes no other argument"},
		{[]string{"watch", "a", "--for", "-1s"}, "invalid --for"},
	} {
		code, _, errOut := shoal(t, append([]string{"--host", "127.0.0.1:1"}, tc.argv...)...)
		if code != 2 || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", tc.argv, code, errOut, tc.want)
		}
	}
}
