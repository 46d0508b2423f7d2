package storage

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// Pebble's error lines are limited to one a second, with the count of those suppressed.
func TestPebbleErrorLinesRateLimited(t *testing.T) {
	var buf bytes.Buffer
	errorLog.mu.Lock()
	errorLog.out, errorLog.last, errorLog.suppressed = &buf, time.Time{}, 0
	errorLog.mu.Unlock()
	defer func() {
		errorLog.mu.Lock()
		errorLog.out, errorLog.last, errorLog.suppressed = nil, time.Time{}, 0
		errorLog.mu.Unlock()
	}()
	var l quietLogger
	for i := 0; i < 1000; i++ {
		l.Errorf("background error: flush %d failed", i)
	}
	if got := strings.Count(buf.String(), "\n"); got != 1 || !strings.Contains(buf.String(), "flush 0 failed") {
		t.Fatalf("1000 errors in a burst wrote %d lines:\n%s", got, buf.String())
	}
	errorLog.mu.Lock()
	errorLog.last = time.Now().Add(-2 * time.Second) // a second has passed
	errorLog.mu.Unlock()
	l.Errorf("background error: flush %d failed", 1000)
	if !strings.Contains(buf.String(), "(999 similar lines suppressed)") || !strings.Contains(buf.String(), "flush 1000 failed") {
		t.Errorf("after a second, want the suppressed count and the new line:\n%s", buf.String())
	}
}
