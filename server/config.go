package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"reflect"
	"strconv"
	"strings"
	"unicode"

	"github.com/shoaldb/shoal/node"
	"github.com/shoaldb/shoal/transport"
)

// Defaults of the listeners. Everything below the listeners takes the defaults of its own layer
// (node.Config.WithDefaults), so that what `shoal start --print-config` prints is what the node runs with.
const (
	// DefaultListen is the default gRPC listen address.
	DefaultListen = "127.0.0.1:26257"
	// DefaultHTTP is the default HTTP listen address.
	DefaultHTTP = "127.0.0.1:8080"
	// HTTPOff as Config.HTTP disables the HTTP listener.
	HTTPOff = "off"
	// MinGRPCMsgBytes is the lower bound of the gRPC server's message size limit for the public API; the
	// limit is also at least transport.MaxRecvMessageBytes, for raft traffic.
	MinGRPCMsgBytes = 16 << 20
)

// Config configures one node process: its listeners and the node they serve. Zero values take the
// defaults (see WithDefaults).
type Config struct {
	// Node is the node's configuration: its store, identity, and every layer's settings. Node.Addr
	// is filled in from Advertise or the listener.
	Node node.Config
	// Listen is the gRPC listen address (default DefaultListen). Port 0 picks a free port.
	Listen string
	// Advertise is the gRPC address other nodes and clients dial. Default: the actual listen address
	// (port 0 resolved to the real port; an unspecified host such as 0.0.0.0 replaced by the hostname).
	Advertise string
	// HTTP is the HTTP listen address (default DefaultHTTP); HTTPOff disables the listener.
	HTTP string
	// RESP is the listen address of the RESP (Redis Cluster protocol) listener, package server/resp;
	// its advertised form goes into the node's descriptor. Empty disables it.
	RESP string
	// CertsDir, when set, turns on TLS (see docs/design/tls.md): it holds ca.crt, node.crt and node.key
	// (`shoal cert create-ca`, `create-node`). The gRPC listener then requires client certificates signed
	// by the CA (mutual TLS; nodes present node.crt to each other), node-to-node dials verify the peer
	// against the CA, HTTP is served over HTTPS and RESP over TLS (client certificates optional on both).
	// Empty: everything in clear text.
	//
	// Node.AuthToken, when set, is required as "authorization: Bearer <token>" on every gRPC call and on
	// the HTTP /api/ and /debug/ endpoints; /healthz, /metrics and the dashboard page stay open.
	CertsDir string
}

// WithDefaults returns a copy of c with every zero field set to its default.
func (c Config) WithDefaults() Config {
	if c.Listen == "" {
		c.Listen = DefaultListen
	}
	if c.HTTP == "" {
		c.HTTP = DefaultHTTP
	}
	c.Node = c.Node.WithDefaults()
	return c
}

// Validate reports every problem of c at once. It accepts zero values (they take defaults), so it may
// be called before or after WithDefaults.
func (c *Config) Validate() error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }

	if strings.TrimSpace(c.Node.DataDir) == "" {
		add("missing data directory: set --data-dir")
	}
	if c.Listen != "" {
		if err := checkAddr(c.Listen); err != nil {
			add("invalid listen address %q: %v", c.Listen, err)
		}
	}
	if c.Advertise != "" {
		if err := checkAddr(c.Advertise); err != nil {
			add("invalid advertise address %q: %v", c.Advertise, err)
		} else if host, port, _ := net.SplitHostPort(c.Advertise); port == "0" || isUnspecified(host) {
			add("invalid advertise address %q: other nodes must be able to dial it (give a real host and a non-zero port)", c.Advertise)
		}
	}
	if c.HTTP != "" && c.HTTP != HTTPOff {
		if err := checkAddr(c.HTTP); err != nil {
			add("invalid HTTP address %q (use %q to disable HTTP): %v", c.HTTP, HTTPOff, err)
		}
	}
	if c.RESP != "" {
		if err := checkAddr(c.RESP); err != nil {
			add("invalid RESP address %q: %v", c.RESP, err)
		}
	}
	for _, j := range c.Node.Join {
		if err := checkAddr(j); err != nil {
			add("invalid join address %q: %v", j, err)
		}
	}
	if c.Node.Bootstrap && len(c.Node.Join) > 0 {
		add("--bootstrap and --join are exclusive: bootstrap the first node of a new cluster, join the others through it")
	}
	if c.CertsDir != "" && strings.TrimSpace(c.CertsDir) == "" {
		add("certs directory is blank")
	}
	if strings.ContainsAny(c.Node.AuthToken, " \t\r\n") {
		add("auth token must not contain whitespace")
	}
	// The node's own checks, without the data directory (reported above with its flag).
	nc := c.Node
	if strings.TrimSpace(nc.DataDir) == "" {
		nc.DataDir = "-"
	}
	if err := nc.Validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// checkAddr accepts host:port with a numeric port in [0, 65535]; the host may be empty (all interfaces).
func checkAddr(addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	p, err := strconv.Atoi(port)
	if err != nil || p < 0 || p > 65535 {
		return fmt.Errorf("port %q is not a number in 0..65535", port)
	}
	return nil
}

func isUnspecified(host string) bool {
	if host == "" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsUnspecified()
}

// grpcMaxMsgBytes is the gRPC server's message size limit: room for the largest value plus its key and
// envelope, at least MinGRPCMsgBytes, and at least what the raft transport needs.
func (c Config) grpcMaxMsgBytes() int {
	kc := c.Node.KV.WithDefaults()
	return max(kc.MaxValueBytes+kc.MaxKeyBytes+1<<20, MinGRPCMsgBytes, transport.MaxRecvMessageBytes)
}

// MarshalJSON renders the effective configuration tree for `shoal start --print-config`: every layer's
// settings with defaults applied, keys in snake_case, durations as strings, and the auth token
// redacted, so that a Config can never leak its token through JSON.
func (c Config) MarshalJSON() ([]byte, error) {
	eff := c.WithDefaults()
	tree := configTree(reflect.ValueOf(eff)).(map[string]any)
	token := ""
	if c.Node.AuthToken != "" {
		token = "(redacted)"
	}
	tree["node"].(map[string]any)["auth_token"] = token
	tree["grpc_max_msg_bytes"] = eff.grpcMaxMsgBytes()
	return json.Marshal(tree)
}

// String renders c as its JSON form, so that printing a Config (%v) never shows the auth token.
func (c Config) String() string {
	b, err := c.MarshalJSON()
	if err != nil {
		return fmt.Sprintf("server.Config{%v}", err)
	}
	return string(b)
}

var stringerType = reflect.TypeFor[fmt.Stringer]()

// configTree turns a configuration value into plain JSON values: structs become objects keyed by
// their fields' json names (snake_case of the field name when untagged; embedded structs flattened;
// `json:"-"` and functions, channels and interfaces left out), durations and other scalars with a
// String method become their strings, nil slices empty arrays.
func configTree(v reflect.Value) any {
	if v.Kind() != reflect.Struct && v.Kind() != reflect.Pointer && v.Type().Implements(stringerType) {
		return v.Interface().(fmt.Stringer).String()
	}
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			return nil
		}
		return configTree(v.Elem())
	case reflect.Struct:
		out := map[string]any{}
		addFields(out, v)
		return out
	case reflect.Slice, reflect.Array:
		out := make([]any, 0, v.Len())
		for i := 0; i < v.Len(); i++ {
			out = append(out, configTree(v.Index(i)))
		}
		return out
	case reflect.Map:
		out := map[string]any{}
		for _, k := range v.MapKeys() {
			out[fmt.Sprint(k.Interface())] = configTree(v.MapIndex(k))
		}
		return out
	}
	return v.Interface()
}

func addFields(out map[string]any, v reflect.Value) {
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		switch f.Type.Kind() {
		case reflect.Func, reflect.Chan, reflect.Interface, reflect.UnsafePointer:
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct {
			addFields(out, v.Field(i))
			continue
		}
		if name == "" {
			name = snakeCase(f.Name)
		}
		out[name] = configTree(v.Field(i))
	}
}

// snakeCase turns a Go field name into snake_case: MaxKeyBytes → max_key_bytes, HTTPAddr → http_addr.
func snakeCase(s string) string {
	r := []rune(s)
	var b strings.Builder
	for i, c := range r {
		if unicode.IsUpper(c) {
			if i > 0 && (unicode.IsLower(r[i-1]) || unicode.IsDigit(r[i-1]) || i+1 < len(r) && unicode.IsLower(r[i+1])) {
				b.WriteByte('_')
			}
			c = unicode.ToLower(c)
		}
		b.WriteRune(c)
	}
	return b.String()
}
