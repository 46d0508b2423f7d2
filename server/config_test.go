package server

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func TestConfigValidate(t *testing.T) {
	ok := Config{DataDir: "/tmp/d"}
	for _, tc := range []struct {
		name string
		mod  func(*Config)
		want string // substring of the error; "" = valid
	}{
		{"minimal", func(c *Config) {}, ""},
		{"defaults applied", func(c *Config) { *c = c.WithDefaults() }, ""},
		{"all set", func(c *Config) {
			c.Listen, c.Advertise, c.HTTP, c.RESP = "0.0.0.0:26257", "db1.example:26257", "127.0.0.1:0", ":6379"
			c.Join, c.AuthToken, c.CacheBytes = []string{"10.0.0.1:26257", "[::1]:26257"}, "s3cret", 1<<30
		}, ""},
		{"http off", func(c *Config) { c.HTTP = HTTPOff }, ""},
		{"ipv6 listen", func(c *Config) { c.Listen = "[::1]:0" }, ""},
		{"missing data dir", func(c *Config) { c.DataDir = "" }, "missing data directory"},
		{"blank data dir", func(c *Config) { c.DataDir = "  " }, "missing data directory"},
		{"listen without port", func(c *Config) { c.Listen = "127.0.0.1" }, `invalid listen address "127.0.0.1"`},
		{"listen bad port", func(c *Config) { c.Listen = "127.0.0.1:http" }, "invalid listen address"},
		{"listen port too big", func(c *Config) { c.Listen = "127.0.0.1:70000" }, "0..65535"},
		{"advertise port 0", func(c *Config) { c.Advertise = "db1:0" }, "invalid advertise address"},
		{"advertise unspecified", func(c *Config) { c.Advertise = "0.0.0.0:26257" }, "must be able to dial"},
		{"advertise garbage", func(c *Config) { c.Advertise = "db1" }, "invalid advertise address"},
		{"bad http", func(c *Config) { c.HTTP = "8080" }, "invalid HTTP address"},
		{"bad resp", func(c *Config) { c.RESP = "localhost" }, "invalid RESP address"},
		{"bad join", func(c *Config) { c.Join = []string{"10.0.0.1:26257", "nope"} }, `invalid join address "nope"`},
		{"bootstrap and join", func(c *Config) { c.Bootstrap, c.Join = true, []string{"a:1"} }, "exclusive"},
		{"negative cache", func(c *Config) { c.CacheBytes = -1 }, "cache size must not be negative"},
		{"negative key", func(c *Config) { c.MaxKeyBytes = -1 }, "max key bytes"},
		{"negative value", func(c *Config) { c.MaxValueBytes = -5 }, "max value bytes"},
		{"huge value", func(c *Config) { c.MaxValueBytes = 2 << 30 }, "at most 1 GiB"},
		{"negative range", func(c *Config) { c.RangeMaxBytes = -1 }, "range max bytes"},
		{"negative tick", func(c *Config) { c.TickInterval = -time.Second }, "tick interval"},
		{"negative dead", func(c *Config) { c.DeadNodeTimeout = -time.Second }, "dead node timeout"},
		{"token with space", func(c *Config) { c.AuthToken = "a b" }, "whitespace"},
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
	c := Config{Listen: "x", CacheBytes: -1}
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
	c := Config{DataDir: "d", MaxValueBytes: 100}.WithDefaults()
	if c.Listen != DefaultListen || c.HTTP != DefaultHTTP || c.CacheBytes != DefaultCacheBytes ||
		c.MaxKeyBytes != DefaultMaxKeyBytes || c.MaxValueBytes != 100 || c.RangeMaxBytes != DefaultRangeMaxBytes ||
		c.TickInterval != DefaultTickInterval || c.DeadNodeTimeout != DefaultDeadNodeTimeout {
		t.Fatalf("WithDefaults() = %+v", c)
	}
	if c.Advertise != "" || c.RESP != "" {
		t.Fatalf("Advertise and RESP have no static default: %+v", c)
	}
	if n := c.grpcMaxMsgBytes(); n < MinGRPCMsgBytes {
		t.Fatalf("grpc limit %d below %d", n, MinGRPCMsgBytes)
	}
	big := Config{MaxValueBytes: 512 << 20}.WithDefaults()
	if n := big.grpcMaxMsgBytes(); n < big.MaxValueBytes+(1<<20) {
		t.Fatalf("grpc limit %d too small for values of %d", n, big.MaxValueBytes)
	}
}

func TestConfigJSONRedactsToken(t *testing.T) {
	c := Config{DataDir: "d", AuthToken: "hunter2-token"}.WithDefaults()
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
	if m["auth_token"] != "(redacted)" || m["tick_interval"] != "100ms" || m["listen"] != DefaultListen {
		t.Fatalf("unexpected JSON: %s", b)
	}
	b, _ = json.Marshal(Config{DataDir: "d"})
	if !strings.Contains(string(b), `"auth_token":""`) || !strings.Contains(string(b), `"join":[]`) {
		t.Fatalf("unexpected JSON without token: %s", b)
	}
}
