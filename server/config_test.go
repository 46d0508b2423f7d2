package server

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/shoaldb/shoal/autopilot/model"
	"github.com/shoaldb/shoal/kv"
	"github.com/shoaldb/shoal/node"
	"github.com/shoaldb/shoal/storage"
)

func TestConfigValidate(t *testing.T) {
	ok := Config{Node: node.Config{DataDir: "/tmp/d"}}
	for _, tc := range []struct {
		name string
		mod  func(*Config)
		want string // substring of the error; "" = valid
	}{
		{"minimal", func(c *Config) {}, ""},
		{"defaults applied", func(c *Config) { *c = c.WithDefaults() }, ""},
		{"all set", func(c *Config) {
			c.Listen, c.Advertise, c.HTTP, c.RESP = "0.0.0.0:26257", "db1.example:26257", "127.0.0.1:0", ":6379"
			c.Node.Join, c.Node.AuthToken, c.Node.Storage.CacheBytes = []string{"10.0.0.1:26257", "[::1]:26257"}, "s3cret", 1<<30
		}, ""},
		{"http off", func(c *Config) { c.HTTP = HTTPOff }, ""},
		{"ipv6 listen", func(c *Config) { c.Listen = "[::1]:0" }, ""},
		{"missing data dir", func(c *Config) { c.Node.DataDir = "" }, "missing data directory"},
		{"blank data dir", func(c *Config) { c.Node.DataDir = "  " }, "missing data directory"},
		{"listen without port", func(c *Config) { c.Listen = "127.0.0.1" }, `invalid listen address "127.0.0.1"`},
		{"listen bad port", func(c *Config) { c.Listen = "127.0.0.1:http" }, "invalid listen address"},
		{"listen port too big", func(c *Config) { c.Listen = "127.0.0.1:70000" }, "0..65535"},
		{"advertise port 0", func(c *Config) { c.Advertise = "db1:0" }, "invalid advertise address"},
		{"advertise unspecified", func(c *Config) { c.Advertise = "0.0.0.0:26257" }, "must be able to dial"},
		{"advertise garbage", func(c *Config) { c.Advertise = "db1" }, "invalid advertise address"},
		{"bad http", func(c *Config) { c.HTTP = "8080" }, "invalid HTTP address"},
		{"bad resp", func(c *Config) { c.RESP = "localhost" }, "invalid RESP address"},
		{"bad join", func(c *Config) { c.Node.Join = []string{"10.0.0.1:26257", "nope"} }, `invalid join address "nope"`},
		{"bootstrap and join", func(c *Config) { c.Node.Bootstrap, c.Node.Join = true, []string{"a:1"} }, "exclusive"},
		{"negative cache", func(c *Config) { c.Node.Storage.CacheBytes = -1 }, "cache size must not be negative"},
		{"negative key", func(c *Config) { c.Node.KV.MaxKeyBytes = -1 }, "max key bytes"},
		{"negative value", func(c *Config) { c.Node.KV.MaxValueBytes = -5 }, "max value bytes"},
		{"huge value", func(c *Config) { c.Node.KV.MaxValueBytes = 2 << 30 }, "at most 1 GiB"},
		{"negative range", func(c *Config) { c.Node.KV.RangeMaxBytes = -1 }, "range max bytes"},
		{"negative tick", func(c *Config) { c.Node.Raft.TickInterval = -time.Second }, "tick interval"},
		{"negative dead", func(c *Config) { c.Node.DeadNodeTimeout = -time.Second }, "dead node timeout"},
		{"token with space", func(c *Config) { c.Node.AuthToken = "a b" }, "whitespace"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := ok
			tc.mod(&c)
			err := c.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("Validate() = %v, want nil", err)
			case tc.want != "" && err == nil:
				t.Fatalf("Validate() = nil, want error containing %q", tc.want)
			case tc.want != "" && !strings.Contains(err.Error(), tc.want):
				t.Fatalf("Validate() = %q, want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestConfigValidateReportsEveryProblem(t *testing.T) {
	c := Config{Listen: "x", Node: node.Config{Storage: storage.Options{CacheBytes: -1}}}
	err := c.Validate()
	if err == nil {
		t.Fatal("want an error")
	}
	for _, want := range []string{"missing data directory", "invalid listen address", "cache size"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}

func TestConfigWithDefaults(t *testing.T) {
	c := Config{Node: node.Config{DataDir: "d", KV: kv.Config{MaxValueBytes: 100}}}.WithDefaults()
	if c.Listen != DefaultListen || c.HTTP != DefaultHTTP || c.Node.KV.MaxKeyBytes != kv.DefaultMaxKeyBytes ||
		c.Node.KV.MaxValueBytes != 100 || c.Node.KV.RangeMaxBytes != kv.DefaultRangeMaxBytes ||
		c.Node.DeadNodeTimeout != model.DefaultDeadAfter || c.Node.HeartbeatInterval != node.DefaultHeartbeatInterval {
		t.Fatalf("WithDefaults() = %+v", c)
	}
	if c.Node.Autopilot.Policies.Replicate.DeadAfter != c.Node.DeadNodeTimeout {
		t.Fatalf("the replicate policy's dead-node timeout %v is not the node's %v", c.Node.Autopilot.Policies.Replicate.DeadAfter, c.Node.DeadNodeTimeout)
	}
	if c.Advertise != "" || c.RESP != "" {
		t.Fatalf("Advertise and RESP have no static default: %+v", c)
	}
	if n := c.grpcMaxMsgBytes(); n < MinGRPCMsgBytes {
		t.Fatalf("grpc limit %d below %d", n, MinGRPCMsgBytes)
	}
	big := Config{Node: node.Config{KV: kv.Config{MaxValueBytes: 512 << 20}}}.WithDefaults()
	if n := big.grpcMaxMsgBytes(); n < big.Node.KV.MaxValueBytes+(1<<20) {
		t.Fatalf("grpc limit %d too small for values of %d", n, big.Node.KV.MaxValueBytes)
	}
}

func TestConfigJSONRedactsToken(t *testing.T) {
	c := Config{Node: node.Config{DataDir: "d", AuthToken: "hunter2-token"}}.WithDefaults()
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "hunter2") || strings.Contains(c.String(), "hunter2") {
		t.Fatalf("token leaked: %s", b)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	n, _ := m["node"].(map[string]any)
	if n["auth_token"] != "(redacted)" || n["dead_node_timeout"] != "1m0s" || m["listen"] != DefaultListen ||
		n["kv"].(map[string]any)["max_key_bytes"] != float64(kv.DefaultMaxKeyBytes) {
		t.Fatalf("unexpected JSON: %s", b)
	}
	b, _ = json.Marshal(Config{Node: node.Config{DataDir: "d"}})
	if !strings.Contains(string(b), `"auth_token":""`) || !strings.Contains(string(b), `"join":[]`) {
		t.Fatalf("unexpected JSON without token: %s", b)
	}
}
