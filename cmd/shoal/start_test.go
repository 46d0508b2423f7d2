package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseSize(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
		err  string
	}{
		{"0", 0, ""},
		{"4096", 4096, ""},
		{"100B", 100, ""},
		{"64MiB", 64 << 20, ""},
		{"64mib", 64 << 20, ""},
		{"64 MiB", 64 << 20, ""},
		{" 1GiB ", 1 << 30, ""},
		{"1G", 1 << 30, ""},
		{"1Gi", 1 << 30, ""},
		{"4k", 4 << 10, ""},
		{"2TiB", 2 << 40, ""},
		{"1.5GiB", 3 << 29, ""},
		{"0.5KiB", 512, ""},
		{"500MB", 500_000_000, ""},
		{"1kB", 1000, ""},
		{"2GB", 2_000_000_000, ""},
		{"", 0, "invalid size"},
		{"MiB", 0, "invalid size"},
		{"-1", 0, "invalid size"},
		{"12XB", 0, "invalid size"},
		{"1.2.3MiB", 0, "not a number"},
		{"1.3B", 0, "whole number"},
		{"0.1KiB", 0, "whole number"},
		{"9999999TiB", 0, "too large"},
		{"9223372036854775808", 0, "too large"},
		{"99999999999999999999.5GiB", 0, "too large"},
	} {
		got, err := parseSize(tc.in)
		switch {
		case tc.err == "" && (err != nil || got != tc.want):
			t.Errorf("parseSize(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("parseSize(%q) = %d, %v; want error containing %q", tc.in, got, err, tc.err)
		}
	}
}

func TestFormatSize(t *testing.T) {
	for n, want := range map[int64]string{0: "0", 100: "100", 4096: "4KiB", 128 << 20: "128MiB", 3 << 29: "1536MiB", 1 << 40: "1TiB", 1000: "1000"} {
		if got := formatSize(n); got != want {
			t.Errorf("formatSize(%d) = %q, want %q", n, got, want)
		}
		if back, err := parseSize(formatSize(n)); err != nil || back != n {
			t.Errorf("parseSize(formatSize(%d)) = %d, %v", n, back, err)
		}
	}
}

func TestStartPrintConfig(t *testing.T) {
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("s3cr3t-from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := shoal(t, "start", "--data-dir", "d", "--listen", "127.0.0.1:0", "--http", "off",
		"--join", "10.0.0.1:26257,10.0.0.2:26257", "--auth-token-file", tokenFile, "--cache-size", "1GiB",
		"--max-value-bytes", "1MiB", "--print-config")
	if code != 0 {
		t.Fatalf("exit %d, stderr %s", code, errOut)
	}
	if strings.Contains(out, "s3cr3t") {
		t.Fatalf("--print-config leaks the token: %s", out)
	}
	cfg := printedConfig(t, out)
	for path, want := range map[string]any{
		"node.data_dir": "d", "listen": "127.0.0.1:0", "http": "off", "node.auth_token": "(redacted)",
		"node.storage.cache_bytes": float64(1 << 30), "node.kv.max_value_bytes": float64(1 << 20),
		"node.kv.max_key_bytes": float64(4096), "node.kv.range_max_bytes": float64(64 << 20),
		"node.raft.tick_interval": "100ms", "node.bootstrap": false,
	} {
		if got := lookup(cfg, path); got != want {
			t.Errorf("%s = %v, want %v", path, got, want)
		}
	}
	if j, _ := lookup(cfg, "node.join").([]any); len(j) != 2 || j[1] != "10.0.0.2:26257" {
		t.Errorf("join = %v", lookup(cfg, "node.join"))
	}

	// --join may be repeated.
	code, out, _ = shoal(t, "start", "--data-dir", "d", "--join", "a:1", "--join", "b:2,c:3", "--print-config")
	if j, _ := lookup(printedConfig(t, out), "node.join").([]any); code != 0 || len(j) != 3 || j[0] != "a:1" || j[2] != "c:3" {
		t.Fatalf("repeated --join: exit %d\n%s", code, out)
	}

	// Defaults only: every layer's own.
	code, out, _ = shoal(t, "start", "--data-dir", "d", "--print-config")
	if code != 0 {
		t.Fatalf("defaults: exit %d\n%s", code, out)
	}
	cfg = printedConfig(t, out)
	for path, want := range map[string]any{
		"listen": "127.0.0.1:26257", "http": "127.0.0.1:8080", "node.auth_token": "", "node.storage.cache_bytes": float64(128 << 20),
		"node.hints.disk_read_share": 0.05, "node.hints.switch_interval": "2s", "node.hints.tuning.shipper.flush_interval": "90ms",
		"node.autopilot.policies.shed.ranking": "mrc", "node.autopilot.policies.replicate.dead_after": "1m0s",
		"node.transport.snapshot_rate_bytes_per_sec": float64(32 << 20), "node.admission.requests.count": float64(4096),
	} {
		if got := lookup(cfg, path); got != want {
			t.Errorf("default %s = %v, want %v", path, got, want)
		}
	}
	code, out, _ = shoal(t, "start", "--data-dir", "d", "--read-hints-switch-interval", "100ms", "--dead-node-timeout", "10s", "--print-config")
	cfg = printedConfig(t, out)
	if code != 0 || lookup(cfg, "node.hints.switch_interval") != "100ms" || lookup(cfg, "node.autopilot.policies.replicate.dead_after") != "10s" {
		t.Fatalf("--read-hints-switch-interval 100ms --dead-node-timeout 10s: exit %d\n%s", code, out)
	}
}

// printedConfig decodes --print-config's output.
func printedConfig(t *testing.T, out string) map[string]any {
	t.Helper()
	var cfg map[string]any
	if err := json.Unmarshal([]byte(out), &cfg); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	return cfg
}

// lookup follows a dotted path through decoded JSON objects (nil when absent).
func lookup(tree map[string]any, path string) any {
	var v any = tree
	for _, k := range strings.Split(path, ".") {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

func TestStartUsageErrors(t *testing.T) {
	empty := filepath.Join(t.TempDir(), "empty")
	os.WriteFile(empty, []byte(" \n"), 0o600)
	for _, tc := range []struct {
		argv []string
		want string
	}{
		{[]string{"start", "--print-config"}, "missing data directory"},
		{[]string{"start", "--data-dir", "d", "--listen", "nope", "--print-config"}, "invalid listen address"},
		{[]string{"start", "--data-dir", "d", "--cache-size", "lots"}, "invalid size"},
		{[]string{"start", "--data-dir", "d", "--bootstrap", "--join", "a:1"}, "exclusive"},
		{[]string{"start", "--data-dir", "d", "--auth-token", "x", "--auth-token-file", empty}, "not both"},
		{[]string{"start", "--data-dir", "d", "--auth-token-file", empty}, "is empty"},
		{[]string{"start", "--data-dir", "d", "--auth-token-file", empty + ".missing"}, "read --auth-token-file"},
		{[]string{"start", "--data-dir", "d", "extra"}, "usage"},
		{[]string{"start", "--data-dir", "d", "--read-hints-disk-read-share", "1.5"}, "--read-hints-disk-read-share 1.5: must be in (0, 1]"},
		{[]string{"start", "--data-dir", "d", "--read-hints-disk-read-share", "0"}, "--read-hints-disk-read-share 0: must be in (0, 1]"},
		{[]string{"start", "--data-dir", "d", "--read-hints-interval", "0s"}, "--read-hints-interval 0s: must be in (0, 1m]"},
		{[]string{"start", "--data-dir", "d", "--read-hints-interval", "2m"}, "--read-hints-interval 2m0s: must be in (0, 1m]"},
		{[]string{"start", "--data-dir", "d", "--read-hints-switch-interval", "1ms"}, "--read-hints-switch-interval 1ms: must be in [10ms, 1h]"},
	} {
		code, _, errOut := shoal(t, tc.argv...)
		if code != 2 || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", tc.argv, code, errOut, tc.want)
		}
	}
}

func TestStartMissingStore(t *testing.T) {
	// Without --bootstrap or --join, an empty data directory is refused before anything listens.
	code, _, errOut := shoal(t, "start", "--data-dir", t.TempDir(), "--listen", "127.0.0.1:0", "--http", "off")
	if code != 1 || !strings.Contains(errOut, "--bootstrap") {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
}
