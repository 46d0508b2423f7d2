package storage

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

// TestLockNamesHolder: a refused open names the PID holding the directory and says what to do.
func TestLockNamesHolder(t *testing.T) {
	dir := t.TempDir()
	e, err := Open(dir, Options{CreateIfMissing: true})
	must(t, err)
	defer e.Close()
	_, err = Open(dir, Options{})
	want := fmt.Sprintf("in use by another shoal process, PID %d", os.Getpid())
	if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), fmt.Sprintf("kill %d", os.Getpid())) {
		t.Fatalf("second Open: %v; want an error naming PID %d and how to stop it", err, os.Getpid())
	}
}
