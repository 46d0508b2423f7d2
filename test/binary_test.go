package test

import (
	"context"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"
)

// TestMain keeps the in-process nodes' logs to warnings and errors unless SHOAL_TEST_LOG=info (at
// info, the suite's nodes print tens of thousands of lines, and a failing test's message drowns in
// them), and removes the shoal binary the process-level suites share (shoalBinary) once every test ran.
func TestMain(m *testing.M) {
	if os.Getenv("SHOAL_TEST_LOG") != "info" {
		slog.SetLogLoggerLevel(slog.LevelWarn)
	}
	code := m.Run()
	if builtDir != "" {
		os.RemoveAll(builtDir)
	}
	os.Exit(code)
}

var (
	buildOnce sync.Once
	builtDir  string
	builtBin  string
	buildErr  error
	buildOut  []byte
)

// shoalBinary is SHOAL_BIN (make test links one from its race-instrumented packages, so that a
// race in a node process shows in its log and fails a chaos run), or the shoal binary
// (CGO_ENABLED=0) built once for every test of the package that runs real processes.
func shoalBinary(t *testing.T) string {
	t.Helper()
	if bin := os.Getenv("SHOAL_BIN"); bin != "" {
		return bin
	}
	buildOnce.Do(func() {
		if builtDir, buildErr = os.MkdirTemp("", "shoal-test-bin-"); buildErr != nil {
			return
		}
		builtBin = filepath.Join(builtDir, "shoal")
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		build := exec.CommandContext(ctx, "go", "build", "-o", builtBin, "github.com/shoaldb/shoal/cmd/shoal")
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		buildOut, buildErr = build.CombinedOutput()
	})
	if buildErr != nil {
		t.Fatalf("build the shoal binary: %v\n%s", buildErr, buildOut)
	}
	return builtBin
}

// chaosSeed is CHAOS_SEED, or one from the clock, logged with the command that replays it.
func chaosSeed(t *testing.T) uint64 {
	t.Helper()
	seed := uint64(time.Now().UnixNano()) % 1_000_000_000
	if s := os.Getenv("CHAOS_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("CHAOS_SEED=%q: %v", s, err)
		}
	}
	t.Logf("chaos seed %d (replay: CHAOS_SEED=%d go test ./test -run %s)", seed, seed, t.Name())
	return seed
}
