package kv

import (
	"testing"
	"time"
)

// TestReplyMargin: a handler stops a tenth of its caller's time early, at most 1 s, never less than
// nothing.
func TestReplyMargin(t *testing.T) {
	for left, want := range map[time.Duration]time.Duration{
		10 * time.Second: time.Second, time.Minute: time.Second, 2 * time.Second: 200 * time.Millisecond, -time.Second: 0,
	} {
		if got := replyMargin(left); got != want {
			t.Errorf("replyMargin(%v) = %v, want %v", left, got, want)
		}
	}
}
