package faultfs

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/shoaldb/shoal/storage"
)

const engineChildEnv = "FAULTFS_ENGINE_CHILD"

// engineChild runs in a child process: it opens a storage.Engine on a faulty filesystem, commits
// 100 synced batches, injects the fault and commits once more. The engine must exit the process
// (status 2) rather than return from that commit.
func engineChild(spec string) {
	dir, fault, _ := strings.Cut(spec, ",")
	fs := Wrap(vfs.Default)
	eng, err := storage.Open(dir, storage.Options{CreateIfMissing: true, FS: fs, CacheBytes: 1 << 20})
	if err != nil {
		fmt.Println("open:", err)
		os.Exit(1)
	}
	commit := func(k, v []byte) error {
		b := eng.NewBatch()
		defer b.Close()
		b.Set(k, v)
		return b.Commit(true)
	}
	for i := 0; i < 100; i++ {
		if err := commit(key(i), val(i)); err != nil {
			fmt.Println("commit before the fault:", err)
			os.Exit(1)
		}
	}
	fmt.Println("synced 100")
	switch fault {
	case "sync":
		fs.FailSyncs(true)
	case "write":
		fs.FailWrites(true)
	case "full":
		fs.FillDisk(100)
	}
	err = commit([]byte("x"), bytes.Repeat([]byte("v"), 1000))
	fmt.Printf("commit under the fault returned: %v\n", err)
	os.Exit(0)
}

// TestEngineExitsOnWALFault runs a storage.Engine in a child process, injects a WAL fault under a
// synced commit, and checks that the process exits with status 2 and a clear FATAL line on stderr
// (the engine's Pebble logger turns Pebble's fatal commit error into an exit: the commit never
// returns, so nothing is acknowledged). The parent then reopens the store: every key synced before
// the fault is there, and it takes writes again.
func TestEngineExitsOnWALFault(t *testing.T) {
	if spec := os.Getenv(engineChildEnv); spec != "" {
		engineChild(spec)
		return
	}
	for _, tc := range []struct{ fault, errno string }{
		{"sync", syscall.EIO.Error()},
		{"write", syscall.EIO.Error()},
		{"full", syscall.ENOSPC.Error()},
	} {
		t.Run(tc.fault, func(t *testing.T) {
			dir := t.TempDir()
			cmd := exec.Command(os.Args[0], "-test.run=^TestEngineExitsOnWALFault$", "-test.count=1")
			cmd.Env = append(os.Environ(), engineChildEnv+"="+dir+","+tc.fault)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 2 {
				t.Fatalf("child: %v, want exit status 2\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
			}
			if !strings.Contains(stdout.String(), "synced 100") || strings.Contains(stdout.String(), "returned") {
				t.Fatalf("child stdout:\n%s", stdout.String())
			}
			line := strings.TrimSpace(stderr.String())
			for _, want := range []string{"FATAL: storage engine failure", "restart it", "pebble: fatal commit error", tc.errno, "injected by faultfs"} {
				if !strings.Contains(line, want) {
					t.Fatalf("child stderr %q: want %q in it", line, want)
				}
			}
			t.Logf("child exited with status 2: %s", line)

			eng, err := storage.Open(dir, storage.Options{CacheBytes: 1 << 20})
			if err != nil {
				t.Fatalf("reopen after the fault: %v", err)
			}
			defer eng.Close()
			for i := 0; i < 100; i++ {
				v, found, err := eng.Get(key(i))
				if err != nil || !found || string(v) != string(val(i)) {
					t.Fatalf("get %s after reopen = %q, %v, %v", key(i), v, found, err)
				}
			}
			b := eng.NewBatch()
			b.Set([]byte("after"), []byte("1"))
			if err := b.Commit(true); err != nil {
				t.Fatalf("commit after reopen: %v", err)
			}
			b.Close()
		})
	}
}
