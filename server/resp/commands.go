package resp

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/shoaldb/shoal/pb"
	"github.com/shoaldb/shoal/server/resp/glob"
	"github.com/shoaldb/shoal/server/resp/wire"
)

// RedisVersion is the Redis version whose command behaviour the listener follows; INFO and HELLO report it.
const RedisVersion = "7.0.0"

// command is one entry of the command table. arity, flags and key positions follow COMMAND's
// conventions (negative arity: at least -arity arguments, counting the name; lastKey -1: the last
// argument), because cluster clients route by them.
type command struct {
	name     string
	arity    int
	flags    []string
	firstKey int
	lastKey  int
	step     int
	write    bool // may write data
	noAuth   bool // allowed before AUTH
	acl      []string
	fn       func(o *op, args [][]byte) error
}

var commandTable map[string]*command

func init() {
	ro := []string{"readonly", "fast"}
	wr := []string{"write", "denyoom"}
	adm := []string{"admin", "noscript", "loading", "stale"}
	cmds := []*command{
		{name: "ping", arity: -1, flags: []string{"fast", "stale"}, acl: []string{"@fast", "@connection"}, fn: cmdPing},
		{name: "echo", arity: 2, flags: []string{"fast"}, acl: []string{"@fast", "@connection"}, fn: cmdEcho},
		{name: "quit", arity: -1, flags: []string{"fast", "no_auth", "stale"}, noAuth: true, acl: []string{"@fast", "@connection"}, fn: cmdQuit},
		{name: "auth", arity: -2, flags: []string{"noscript", "loading", "stale", "fast", "no_auth"}, noAuth: true, acl: []string{"@fast", "@connection"}, fn: cmdAuth},
		{name: "hello", arity: -1, flags: []string{"noscript", "loading", "stale", "fast", "no_auth"}, noAuth: true, acl: []string{"@fast", "@connection"}, fn: cmdHello},
		{name: "select", arity: 2, flags: []string{"loading", "stale", "fast"}, acl: []string{"@keyspace", "@fast"}, fn: cmdSelect},
		{name: "info", arity: -1, flags: []string{"loading", "stale"}, acl: []string{"@slow", "@dangerous"}, fn: cmdInfo},
		{name: "command", arity: -1, flags: []string{"loading", "stale"}, acl: []string{"@slow", "@connection"}, fn: cmdCommand},
		{name: "client", arity: -2, flags: []string{"loading", "stale"}, acl: []string{"@slow", "@connection"}, fn: cmdClient},
		{name: "config", arity: -2, flags: adm, acl: []string{"@admin", "@slow", "@dangerous"}, fn: cmdConfig},
		{name: "cluster", arity: -2, flags: []string{"stale"}, acl: []string{"@slow"}, fn: cmdCluster},
		{name: "readonly", arity: 1, flags: []string{"loading", "stale", "fast"}, acl: []string{"@fast", "@connection"}, fn: cmdReadonly},
		{name: "readwrite", arity: 1, flags: []string{"loading", "stale", "fast"}, acl: []string{"@fast", "@connection"}, fn: cmdReadwrite},
		{name: "asking", arity: 1, flags: []string{"fast"}, acl: []string{"@fast", "@connection"}, fn: cmdAsking},

		{name: "get", arity: 2, flags: ro, firstKey: 1, lastKey: 1, step: 1, acl: []string{"@read", "@string", "@fast"}, fn: cmdGet},
		{name: "set", arity: -3, flags: wr, firstKey: 1, lastKey: 1, step: 1, write: true, acl: []string{"@write", "@string", "@slow"}, fn: cmdPlanned},
		{name: "setnx", arity: 3, flags: []string{"write", "denyoom", "fast"}, firstKey: 1, lastKey: 1, step: 1, write: true, acl: []string{"@write", "@string", "@fast"}, fn: cmdSetnx},
		{name: "mget", arity: -2, flags: ro, firstKey: 1, lastKey: -1, step: 1, acl: []string{"@read", "@string", "@fast"}, fn: cmdMget},
		{name: "mset", arity: -3, flags: wr, firstKey: 1, lastKey: -1, step: 2, write: true, acl: []string{"@write", "@string", "@slow"}, fn: cmdMset},
		{name: "del", arity: -2, flags: []string{"write"}, firstKey: 1, lastKey: -1, step: 1, write: true, acl: []string{"@keyspace", "@write", "@slow"}, fn: cmdDel},
		{name: "unlink", arity: -2, flags: []string{"write", "fast"}, firstKey: 1, lastKey: -1, step: 1, write: true, acl: []string{"@keyspace", "@write", "@fast"}, fn: cmdDel},
		{name: "exists", arity: -2, flags: ro, firstKey: 1, lastKey: -1, step: 1, acl: []string{"@keyspace", "@read", "@fast"}, fn: cmdExists},
		{name: "type", arity: 2, flags: ro, firstKey: 1, lastKey: 1, step: 1, acl: []string{"@keyspace", "@read", "@fast"}, fn: cmdType},
		{name: "incr", arity: 2, flags: []string{"write", "denyoom", "fast"}, firstKey: 1, lastKey: 1, step: 1, write: true, acl: []string{"@write", "@string", "@fast"}, fn: cmdPlanned},
		{name: "decr", arity: 2, flags: []string{"write", "denyoom", "fast"}, firstKey: 1, lastKey: 1, step: 1, write: true, acl: []string{"@write", "@string", "@fast"}, fn: cmdPlanned},
		{name: "incrby", arity: 3, flags: []string{"write", "denyoom", "fast"}, firstKey: 1, lastKey: 1, step: 1, write: true, acl: []string{"@write", "@string", "@fast"}, fn: cmdPlanned},
		{name: "decrby", arity: 3, flags: []string{"write", "denyoom", "fast"}, firstKey: 1, lastKey: 1, step: 1, write: true, acl: []string{"@write", "@string", "@fast"}, fn: cmdPlanned},
		{name: "incrbyfloat", arity: 3, flags: []string{"write", "denyoom", "fast"}, firstKey: 1, lastKey: 1, step: 1, write: true, acl: []string{"@write", "@string", "@fast"}, fn: cmdPlanned},
		{name: "setex", arity: 4, flags: wr, firstKey: 1, lastKey: 1, step: 1, write: true, acl: []string{"@write", "@string", "@slow"}, fn: cmdPlanned},
		{name: "psetex", arity: 4, flags: wr, firstKey: 1, lastKey: 1, step: 1, write: true, acl: []string{"@write", "@string", "@slow"}, fn: cmdPlanned},
		{name: "getset", arity: 3, flags: []string{"write", "denyoom", "fast"}, firstKey: 1, lastKey: 1, step: 1, write: true, acl: []string{"@write", "@string", "@fast"}, fn: cmdPlanned},
		{name: "getdel", arity: 2, flags: []string{"write", "fast"}, firstKey: 1, lastKey: 1, step: 1, write: true, acl: []string{"@write", "@string", "@fast"}, fn: cmdPlanned},
		{name: "getex", arity: -2, flags: []string{"write", "fast"}, firstKey: 1, lastKey: 1, step: 1, write: true, acl: []string{"@write", "@string", "@fast"}, fn: cmdPlanned},
		{name: "append", arity: 3, flags: []string{"write", "denyoom", "fast"}, firstKey: 1, lastKey: 1, step: 1, write: true, acl: []string{"@write", "@string", "@fast"}, fn: cmdPlanned},
		{name: "strlen", arity: 2, flags: ro, firstKey: 1, lastKey: 1, step: 1, acl: []string{"@read", "@string", "@fast"}, fn: cmdPlanned},
		{name: "expire", arity: -3, flags: []string{"write", "fast"}, firstKey: 1, lastKey: 1, step: 1, write: true, acl: []string{"@keyspace", "@write", "@fast"}, fn: cmdPlanned},
		{name: "pexpire", arity: -3, flags: []string{"write", "fast"}, firstKey: 1, lastKey: 1, step: 1, write: true, acl: []string{"@keyspace", "@write", "@fast"}, fn: cmdPlanned},
		{name: "expireat", arity: -3, flags: []string{"write", "fast"}, firstKey: 1, lastKey: 1, step: 1, write: true, acl: []string{"@keyspace", "@write", "@fast"}, fn: cmdPlanned},
		{name: "pexpireat", arity: -3, flags: []string{"write", "fast"}, firstKey: 1, lastKey: 1, step: 1, write: true, acl: []string{"@keyspace", "@write", "@fast"}, fn: cmdPlanned},
		{name: "persist", arity: 2, flags: []string{"write", "fast"}, firstKey: 1, lastKey: 1, step: 1, write: true, acl: []string{"@keyspace", "@write", "@fast"}, fn: cmdPlanned},
		{name: "ttl", arity: 2, flags: ro, firstKey: 1, lastKey: 1, step: 1, acl: []string{"@keyspace", "@read", "@fast"}, fn: cmdPlanned},
		{name: "pttl", arity: 2, flags: ro, firstKey: 1, lastKey: 1, step: 1, acl: []string{"@keyspace", "@read", "@fast"}, fn: cmdPlanned},
		{name: "multi", arity: 1, flags: []string{"noscript", "loading", "stale", "fast"}, acl: []string{"@fast", "@transaction"}, fn: cmdMulti},
		{name: "exec", arity: 1, flags: []string{"noscript", "loading", "stale", "skip_slowlog"}, write: true, acl: []string{"@slow", "@transaction"}, fn: cmdExec},
		{name: "discard", arity: 1, flags: []string{"noscript", "loading", "stale", "fast"}, acl: []string{"@fast", "@transaction"}, fn: cmdDiscard},
		{name: "watch", arity: -2, flags: []string{"noscript", "loading", "stale", "fast"}, firstKey: 1, lastKey: -1, step: 1, acl: []string{"@fast", "@transaction"}, fn: cmdWatch},
		{name: "unwatch", arity: 1, flags: []string{"noscript", "loading", "stale", "fast"}, acl: []string{"@fast", "@transaction"}, fn: cmdUnwatch},
		{name: "hset", arity: -4, flags: []string{"write", "denyoom", "fast"}, firstKey: 1, lastKey: 1, step: 1, write: true, acl: []string{"@write", "@hash", "@fast"}, fn: cmdHset},
		{name: "hmset", arity: -4, flags: []string{"write", "denyoom", "fast"}, firstKey: 1, lastKey: 1, step: 1, write: true, acl: []string{"@write", "@hash", "@fast"}, fn: cmdHmset},
		{name: "hget", arity: 3, flags: ro, firstKey: 1, lastKey: 1, step: 1, acl: []string{"@read", "@hash", "@fast"}, fn: cmdHget},
		{name: "hmget", arity: -3, flags: ro, firstKey: 1, lastKey: 1, step: 1, acl: []string{"@read", "@hash", "@fast"}, fn: cmdHmget},
		{name: "hgetall", arity: 2, flags: []string{"readonly"}, firstKey: 1, lastKey: 1, step: 1, acl: []string{"@read", "@hash", "@slow"}, fn: cmdHgetall},
		{name: "hdel", arity: -3, flags: []string{"write", "fast"}, firstKey: 1, lastKey: 1, step: 1, write: true, acl: []string{"@write", "@hash", "@fast"}, fn: cmdHdel},
		{name: "hlen", arity: 2, flags: ro, firstKey: 1, lastKey: 1, step: 1, acl: []string{"@read", "@hash", "@fast"}, fn: cmdHlen},
		{name: "hexists", arity: 3, flags: ro, firstKey: 1, lastKey: 1, step: 1, acl: []string{"@read", "@hash", "@fast"}, fn: cmdHexists},
		{name: "scan", arity: -2, flags: []string{"readonly"}, acl: []string{"@keyspace", "@read", "@slow"}, fn: cmdScan},
		{name: "keys", arity: 2, flags: []string{"readonly"}, acl: []string{"@keyspace", "@read", "@slow", "@dangerous"}, fn: cmdKeys},
		{name: "dbsize", arity: 1, flags: []string{"readonly"}, acl: []string{"@keyspace", "@read", "@slow"}, fn: cmdDbsize},
		{name: "flushdb", arity: -1, flags: []string{"write"}, write: true, acl: []string{"@keyspace", "@write", "@slow", "@dangerous"}, fn: cmdFlushdb},
		{name: "flushall", arity: -1, flags: []string{"write"}, write: true, acl: []string{"@keyspace", "@write", "@slow", "@dangerous"}, fn: cmdFlushdb},
	}
	commandTable = make(map[string]*command, len(cmds))
	for _, c := range cmds {
		commandTable[c.name] = c
	}
}

// keyArgs returns the key arguments of args for cmd.
func (cmd *command) keyArgs(args [][]byte) [][]byte {
	if cmd.firstKey == 0 || cmd.firstKey >= len(args) {
		return nil
	}
	last := cmd.lastKey
	if last < 0 {
		last = len(args) + last
	}
	var keys [][]byte
	for i := cmd.firstKey; i <= last && i < len(args); i += cmd.step {
		keys = append(keys, args[i])
	}
	return keys
}

func lowerASCII(dst []byte, b []byte) []byte {
	dst = dst[:0]
	for _, c := range b {
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		dst = append(dst, c)
	}
	return dst
}

func eqFold(b []byte, s string) bool { return strings.EqualFold(string(b), s) }

// argsPreview renders the first arguments for "unknown command" errors like Redis does.
func argsPreview(args [][]byte) string {
	var b strings.Builder
	for i, a := range args {
		if b.Len() > 128 || i >= 8 {
			break
		}
		if len(a) > 128 {
			a = a[:128]
		}
		fmt.Fprintf(&b, "'%s' ", sanitize(a))
	}
	return b.String()
}

// sanitize makes a byte string safe to embed in a one-line error.
func sanitize(b []byte) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, string(b))
}

func (s *Server) dispatch(c *conn, args [][]byte) {
	s.commands.Add(1)
	var lb [32]byte
	name := lowerASCII(lb[:0], args[0])
	cmd := commandTable[string(name)]
	last := "unknown"
	if cmd != nil {
		last = cmd.name
	}
	c.mu.Lock()
	c.lastCmd = last
	c.mu.Unlock()
	if cmd == nil {
		if c.multi != nil {
			c.multi.Aborted = true
		}
		c.w.Error(fmt.Sprintf("ERR unknown command '%s', with args beginning with: %s", sanitize(args[0]), argsPreview(args[1:])))
		return
	}
	if !c.authed && !cmd.noAuth {
		c.w.Error("NOAUTH Authentication required.")
		return
	}
	if (cmd.arity > 0 && len(args) != cmd.arity) || (cmd.arity < 0 && len(args) < -cmd.arity) {
		if c.multi != nil {
			c.multi.Aborted = true
		}
		c.w.Error(fmt.Sprintf("ERR wrong number of arguments for '%s' command", cmd.name))
		return
	}
	if c.multi != nil && !txnControl[cmd.name] {
		s.queue(c, cmd, args)
		return
	}
	o := &op{s: s, c: c, write: cmd.write, slot: -1}
	if keys := cmd.keyArgs(args); len(keys) > 0 {
		o.slot = Slot(keys[0])
		if c.cluster {
			for _, k := range keys[1:] {
				if Slot(k) != o.slot {
					c.w.Error(string(errCrossSlot))
					return
				}
			}
			o.mayMove.Store(true)
		}
	}
	ctx, cancel := context.WithTimeout(s.ctx, s.cfg.CommandTimeout)
	o.ctx = ctx
	start := time.Now()
	err := cmd.fn(o, args)
	cancel()
	if s.cfg.Observe != nil {
		s.cfg.Observe(cmd.name, time.Since(start), err)
	}
	if err != nil {
		c.w.Error(errorReply(err, cmd.write))
	}
}

// ---------- connection commands ----------

func cmdPing(o *op, args [][]byte) error {
	switch len(args) {
	case 1:
		o.c.w.Simple("PONG")
	case 2:
		o.c.w.Bulk(args[1])
	default:
		return replyError("ERR wrong number of arguments for 'ping' command")
	}
	return nil
}

func cmdEcho(o *op, args [][]byte) error {
	o.c.w.Bulk(args[1])
	return nil
}

func cmdQuit(o *op, _ [][]byte) error {
	o.c.w.Simple("OK")
	o.c.quit = true
	return nil
}

// auth checks user (only "default" exists) and password against the token.
func (s *Server) auth(user, pass []byte) error {
	if !s.authOn {
		return replyError("ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?")
	}
	if (user != nil && string(user) != "default") || !s.checkToken(pass) {
		return replyError("WRONGPASS invalid username-password pair or user is disabled.")
	}
	return nil
}

func cmdAuth(o *op, args [][]byte) error {
	var err error
	switch len(args) {
	case 2:
		err = o.s.auth(nil, args[1])
	case 3:
		err = o.s.auth(args[1], args[2])
	default:
		return errSyntax
	}
	if err != nil {
		return err
	}
	o.c.authed = true
	o.c.w.Simple("OK")
	return nil
}

// cmdHello answers HELLO in RESP2 only. A client asking for RESP3 gets the error Redis 5 (which has no
// HELLO) gives, "ERR unknown command ...": every client falls back to RESP2 on it, go-redis included
// (v9.0.0-rc.1, used by go-ycsb, matches that prefix; later v9 releases accept any error reply).
func cmdHello(o *op, args [][]byte) error {
	if len(args) >= 2 {
		v, ok := wire.ParseInt(args[1])
		if !ok {
			return replyError("ERR Protocol version is not an integer or out of range")
		}
		if v == 3 {
			return replyError(fmt.Sprintf("ERR unknown command 'HELLO', with args beginning with: %s(this server speaks RESP2 only)", argsPreview(args[1:])))
		}
		if v != 2 {
			return replyError("NOPROTO unsupported protocol version")
		}
	}
	var name []byte
	authed := o.c.authed
	for i := 2; i < len(args); i++ {
		switch {
		case eqFold(args[i], "auth") && i+2 < len(args):
			if err := o.s.auth(args[i+1], args[i+2]); err != nil {
				return err
			}
			authed = true
			i += 2
		case eqFold(args[i], "setname") && i+1 < len(args):
			name = args[i+1]
			i++
		default:
			return replyError(fmt.Sprintf("ERR Syntax error in HELLO option '%s'", sanitize(args[i])))
		}
	}
	if !authed {
		return replyError("NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time")
	}
	o.c.authed = true
	if name != nil {
		o.c.mu.Lock()
		o.c.name = string(name)
		o.c.mu.Unlock()
	}
	w := o.c.w
	w.Array(14)
	w.BulkString("server")
	w.BulkString("shoal")
	w.BulkString("version")
	w.BulkString(RedisVersion)
	w.BulkString("proto")
	w.Int(2)
	w.BulkString("id")
	w.Int(o.c.id)
	w.BulkString("mode")
	w.BulkString("cluster")
	w.BulkString("role")
	w.BulkString("master")
	w.BulkString("modules")
	w.Array(0)
	return nil
}

func cmdSelect(o *op, args [][]byte) error {
	n, ok := wire.ParseInt(args[1])
	if !ok {
		return errNotInt
	}
	if n != 0 {
		return replyError("ERR DB index is out of range")
	}
	o.c.w.Simple("OK")
	return nil
}

func cmdReadonly(o *op, _ [][]byte) error {
	o.c.cluster, o.c.readonly = true, true
	o.c.w.Simple("OK")
	return nil
}

func cmdReadwrite(o *op, _ [][]byte) error {
	o.c.cluster, o.c.readonly = true, false
	o.c.w.Simple("OK")
	return nil
}

func cmdAsking(o *op, _ [][]byte) error {
	o.c.cluster = true
	o.c.w.Simple("OK")
	return nil
}

func cmdInfo(o *op, args [][]byte) error {
	want := map[string]bool{}
	for _, a := range args[1:] {
		want[strings.ToLower(string(a))] = true
	}
	all := len(want) == 0 || want["all"] || want["everything"] || want["default"]
	s := o.s
	var b strings.Builder
	section := func(name string, lines ...string) {
		if !all && !want[strings.ToLower(name)] {
			return
		}
		if b.Len() > 0 {
			b.WriteString("\r\n")
		}
		b.WriteString("# " + name + "\r\n")
		for _, l := range lines {
			b.WriteString(l + "\r\n")
		}
	}
	_, port := splitHostPort(s.advertised())
	section("Server",
		"redis_version:"+RedisVersion,
		"redis_mode:cluster",
		"server_name:shoal",
		fmt.Sprintf("shoal_node_id:%d", s.node.NodeID()),
		"shoal_cluster_id:"+s.node.ClusterID(),
		"os:"+runtime.GOOS+" "+runtime.GOARCH,
		"arch_bits:64",
		fmt.Sprintf("process_id:%d", os.Getpid()),
		"run_id:"+s.redisNodeID(s.node.NodeID()),
		fmt.Sprintf("tcp_port:%d", port),
		fmt.Sprintf("uptime_in_seconds:%d", int(time.Since(s.started).Seconds())),
		"resp_protocols:2",
	)
	section("Clients", fmt.Sprintf("connected_clients:%d", s.connCount()), fmt.Sprintf("maxclients:%d", s.cfg.MaxClients))
	section("Stats", fmt.Sprintf("total_commands_processed:%d", s.commands.Load()))
	if all || want["replication"] {
		section("Replication", o.replicationInfo()...)
	}
	section("Cluster", "cluster_enabled:1")
	if all || want["keyspace"] {
		// Counted like DBSIZE (a scan of the keys the connection covers): only when asked for.
		var lines []string
		n, err := o.countKeys()
		switch {
		case err != nil && want["keyspace"]:
			return err
		case err == nil && n > 0:
			lines = append(lines, fmt.Sprintf("db0:keys=%d,expires=0,avg_ttl=0", n))
		}
		section("Keyspace", lines...)
	}
	o.c.w.BulkString(b.String())
	return nil
}

// replicationInfo is INFO's replication section, with the role CLUSTER NODES gives this node (a node
// that leads no slots is a replica of the master it holds the most slots of).
func (o *op) replicationInfo() []string {
	m, err := o.s.slotMap(o.ctx, slotMapMaxAge)
	if err != nil {
		return []string{"role:master", "connected_slaves:0"}
	}
	return m.roleInfo()
}

// roleInfo is INFO's replication section for the node the map was built on.
func (m *slotMap) roleInfo() []string {
	if mid := m.masterOf(m.self); mid != 0 {
		if n := m.nodes[mid]; n != nil {
			host, port := splitHostPort(n.resp)
			return []string{"role:slave", "master_host:" + host, fmt.Sprintf("master_port:%d", port), "master_link_status:up"}
		}
	}
	slaves := 0
	for id := range m.nodes {
		if id != m.self && m.masterOf(id) == m.self {
			slaves++
		}
	}
	return []string{"role:master", fmt.Sprintf("connected_slaves:%d", slaves)}
}

func cmdCommand(o *op, args [][]byte) error {
	w := o.c.w
	if len(args) == 1 {
		names := make([]string, 0, len(commandTable))
		for n := range commandTable {
			names = append(names, n)
		}
		sort.Strings(names)
		w.Array(len(names))
		for _, n := range names {
			writeCommandInfo(w, commandTable[n])
		}
		return nil
	}
	switch strings.ToLower(string(args[1])) {
	case "count":
		w.Int(int64(len(commandTable)))
	case "info":
		w.Array(len(args) - 2)
		for _, a := range args[2:] {
			if cmd := commandTable[strings.ToLower(string(a))]; cmd != nil {
				writeCommandInfo(w, cmd)
			} else {
				w.NullArray()
			}
		}
	case "docs":
		w.Array(0) // no documentation: redis-cli falls back to its own hints
	case "list":
		names := make([]string, 0, len(commandTable))
		for n := range commandTable {
			names = append(names, n)
		}
		sort.Strings(names)
		w.Array(len(names))
		for _, n := range names {
			w.BulkString(n)
		}
	case "getkeys":
		if len(args) < 3 {
			return replyError("ERR wrong number of arguments for 'command|getkeys' command")
		}
		cmd := commandTable[strings.ToLower(string(args[2]))]
		if cmd == nil {
			return replyError("ERR Invalid command specified")
		}
		keys := cmd.keyArgs(args[2:])
		if len(keys) == 0 {
			return replyError("ERR The command has no key arguments")
		}
		w.Array(len(keys))
		for _, k := range keys {
			w.Bulk(k)
		}
	default:
		return unknownSubcommand(args[1], "COMMAND")
	}
	return nil
}

// writeCommandInfo writes one COMMAND entry in the Redis 6 layout (7 elements).
func writeCommandInfo(w *wire.Writer, cmd *command) {
	w.Array(7)
	w.BulkString(cmd.name)
	w.Int(int64(cmd.arity))
	w.Array(len(cmd.flags))
	for _, f := range cmd.flags {
		w.Simple(f)
	}
	w.Int(int64(cmd.firstKey))
	w.Int(int64(cmd.lastKey))
	w.Int(int64(cmd.step))
	w.Array(len(cmd.acl))
	for _, a := range cmd.acl {
		w.Simple(a)
	}
}

func unknownSubcommand(sub []byte, cmd string) error {
	return replyError(fmt.Sprintf("ERR unknown subcommand '%s'. Try %s HELP.", sanitize(sub), cmd))
}

func cmdClient(o *op, args [][]byte) error {
	c, w := o.c, o.c.w
	switch strings.ToLower(string(args[1])) {
	case "id":
		w.Int(c.id)
	case "setname":
		if len(args) != 3 {
			return replyError("ERR wrong number of arguments for 'client|setname' command")
		}
		if bytes.ContainsAny(args[2], " \r\n") {
			return replyError("ERR Client names cannot contain spaces, newlines or special characters.")
		}
		c.mu.Lock()
		c.name = string(args[2])
		c.mu.Unlock()
		w.Simple("OK")
	case "getname":
		c.mu.Lock()
		name := c.name
		c.mu.Unlock()
		if name == "" {
			w.Null()
		} else {
			w.BulkString(name)
		}
	case "setinfo":
		if len(args) != 4 {
			return replyError("ERR wrong number of arguments for 'client|setinfo' command")
		}
		c.mu.Lock()
		switch strings.ToLower(string(args[2])) {
		case "lib-name":
			c.libName = string(args[3])
		case "lib-ver":
			c.libVer = string(args[3])
		default:
			c.mu.Unlock()
			return replyError(fmt.Sprintf("ERR Unrecognized option '%s'", sanitize(args[2])))
		}
		c.mu.Unlock()
		w.Simple("OK")
	case "info":
		w.BulkString(o.s.clientLine(c) + "\n")
	case "list":
		conns := o.s.allConns()
		sort.Slice(conns, func(i, j int) bool { return conns[i].id < conns[j].id })
		var b strings.Builder
		for _, x := range conns {
			b.WriteString(o.s.clientLine(x) + "\n")
		}
		w.BulkString(b.String())
	case "no-evict", "no-touch", "reply":
		w.Simple("OK")
	default:
		return unknownSubcommand(args[1], "CLIENT")
	}
	return nil
}

func (s *Server) clientLine(c *conn) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	flags := "N"
	if c.readonly {
		flags = "r"
	}
	return fmt.Sprintf("id=%d addr=%s laddr=%s name=%s age=%d db=0 flags=%s cmd=%s lib-name=%s lib-ver=%s resp=2",
		c.id, c.nc.RemoteAddr(), c.nc.LocalAddr(), c.name, int(time.Since(c.created).Seconds()), flags, c.lastCmd, c.libName, c.libVer)
}

func cmdConfig(o *op, args [][]byte) error {
	w := o.c.w
	switch strings.ToLower(string(args[1])) {
	case "get":
		if len(args) < 3 {
			return replyError("ERR wrong number of arguments for 'config|get' command")
		}
		params := map[string]string{
			"save":               "",
			"appendonly":         "no",
			"databases":          "1",
			"maxmemory":          "0",
			"maxclients":         strconv.Itoa(o.s.cfg.MaxClients),
			"cluster-enabled":    "yes",
			"proto-max-bulk-len": strconv.Itoa(o.s.cfg.MaxValueBytes),
			"timeout":            "0",
		}
		var out []string
		for name, v := range params {
			for _, pat := range args[2:] {
				if glob.Match(bytes.ToLower(pat), []byte(name)) {
					out = append(out, name, v)
					break
				}
			}
		}
		w.Array(len(out))
		for _, x := range out {
			w.BulkString(x)
		}
	case "resetstat":
		w.Simple("OK")
	case "set", "rewrite":
		return replyError("ERR CONFIG " + strings.ToUpper(string(args[1])) + " is not supported: configure Shoal with `shoal start` flags")
	default:
		return unknownSubcommand(args[1], "CONFIG")
	}
	return nil
}

func cmdCluster(o *op, args [][]byte) error {
	o.c.cluster = true
	w := o.c.w
	sub := strings.ToLower(string(args[1]))
	switch sub {
	case "myid":
		w.BulkString(o.s.redisNodeID(o.s.node.NodeID()))
		return nil
	case "keyslot":
		if len(args) != 3 {
			return replyError("ERR wrong number of arguments for 'cluster|keyslot' command")
		}
		w.Int(int64(Slot(args[2])))
		return nil
	case "slots", "shards", "nodes", "info", "countkeysinslot", "getkeysinslot":
	default:
		return unknownSubcommand(args[1], "CLUSTER")
	}
	m, err := o.s.slotMap(o.ctx, slotMapMaxAge)
	if err != nil {
		return err
	}
	switch sub {
	case "slots":
		o.s.clusterSlots(w, m)
	case "shards":
		o.s.clusterShards(w, m)
	case "nodes":
		w.BulkString(o.s.clusterNodes(m))
	case "info":
		w.BulkString(o.s.clusterInfo(m))
	case "countkeysinslot", "getkeysinslot":
		if (sub == "countkeysinslot" && len(args) != 3) || (sub == "getkeysinslot" && len(args) != 4) {
			return replyError(fmt.Sprintf("ERR wrong number of arguments for 'cluster|%s' command", sub))
		}
		slot, ok := wire.ParseInt(args[2])
		if !ok || slot < 0 || slot >= NumSlots {
			return replyError("ERR Invalid slot")
		}
		limit := int64(0)
		if sub == "getkeysinslot" {
			if limit, ok = wire.ParseInt(args[3]); !ok || limit < 0 {
				return replyError("ERR Invalid number of keys")
			}
			if limit == 0 {
				w.Array(0)
				return nil
			}
		}
		var keys [][]byte
		_, err := o.scanKeys([][2]int{{int(slot), int(slot)}}, int(slot), 0, func(d decodedKey, _ byte) bool {
			keys = append(keys, append([]byte(nil), d.key...))
			return limit == 0 || int64(len(keys)) < limit
		})
		if err != nil {
			return err
		}
		if sub == "countkeysinslot" {
			w.Int(int64(len(keys)))
			return nil
		}
		w.Array(len(keys))
		for _, k := range keys {
			w.Bulk(k)
		}
	}
	return nil
}

// ---------- keys ----------

// checkKey refuses a Redis key (with an optional hash field) whose Shoal key would exceed the node's
// key limit.
func (o *op) checkKey(k, field []byte) error {
	n := len(groupPrefix(k)) + 1 + len(field)
	if n > o.s.cfg.MaxKeyBytes {
		what := "key"
		if field != nil {
			what = "key and hash field"
		}
		return replyError(fmt.Sprintf("ERR %s too long: %d bytes with Shoal's key encoding, the limit is %d (server flag --max-key-bytes)", what, n, o.s.cfg.MaxKeyBytes))
	}
	return nil
}

// hashExists reports whether the hash k has a field (whatever the string key says).
func (o *op) hashExists(k []byte) (bool, error) {
	start, end := fieldsSpan(k)
	kvs, _, err := o.scan(start, end, 1)
	return len(kvs) > 0, err
}

// typeOf is the type of k: 's' string, 'h' hash or 0 (none). A string hides hash fields left beside it.
func (o *op) typeOf(k []byte) (byte, error) {
	start, end := groupSpan(k)
	kvs, _, err := o.scan(start, end, 1)
	if err != nil || len(kvs) == 0 {
		return 0, err
	}
	if d, ok := decodeKey(kvs[0].Key); ok && d.tag == tagString {
		return 's', nil
	}
	return 'h', nil
}

func cmdGet(o *op, args [][]byte) error {
	k := args[1]
	if err := o.checkKey(k, nil); err != nil {
		return err
	}
	v, found, err := o.get(stringKey(k))
	if err != nil {
		return err
	}
	if found {
		o.c.w.Bulk(v)
		return nil
	}
	if h, err := o.hashExists(k); err != nil {
		return err
	} else if h {
		return errWrongType
	}
	o.c.w.Null()
	return nil
}

func cmdSetnx(o *op, args [][]byte) error {
	k := args[1]
	if err := o.checkKey(k, nil); err != nil {
		return err
	}
	if h, err := o.hashExists(k); err != nil {
		return err
	} else if h {
		o.c.w.Int(0)
		return nil
	}
	swapped, err := o.cas(stringKey(k), nil, true, args[2])
	if err != nil {
		return err
	}
	o.c.w.Int(b2i(swapped))
	return nil
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

func cmdMget(o *op, args [][]byte) error {
	keys := args[1:]
	for _, k := range keys {
		if err := o.checkKey(k, nil); err != nil {
			return err
		}
	}
	vals := make([][]byte, len(keys))
	found := make([]bool, len(keys))
	err := each(len(keys), func(i int) error {
		v, f, err := o.get(stringKey(keys[i]))
		vals[i], found[i] = v, f
		return err
	})
	if err != nil {
		return err
	}
	o.c.w.Array(len(keys))
	for i := range keys {
		if found[i] {
			o.c.w.Bulk(vals[i])
		} else {
			o.c.w.Null()
		}
	}
	return nil
}

func cmdMset(o *op, args [][]byte) error {
	if len(args)%2 != 1 {
		return replyError("ERR wrong number of arguments for 'mset' command")
	}
	muts := make([]*pb.Mutation, 0, len(args)/2)
	seen := map[string]int{}
	for i := 1; i < len(args); i += 2 {
		if err := o.checkKey(args[i], nil); err != nil {
			return err
		}
		m := &pb.Mutation{Key: stringKey(args[i]), Value: args[i+1]}
		if j, ok := seen[string(args[i])]; ok {
			muts[j] = m // the last value of a repeated key wins, as in Redis
			continue
		}
		seen[string(args[i])] = len(muts)
		muts = append(muts, m)
	}
	if err := o.batch(muts); err != nil {
		return err
	}
	o.c.w.Simple("OK")
	return nil
}

// delKey deletes every Shoal key of k and reports whether there was any.
func (o *op) delKey(k []byte) (bool, error) {
	start, end := groupSpan(k)
	existed := false
	for {
		kvs, more, err := o.scan(start, end, 1000)
		if err != nil || len(kvs) == 0 {
			return existed, err
		}
		existed = true
		muts := make([]*pb.Mutation, len(kvs))
		for i, kv := range kvs {
			muts[i] = &pb.Mutation{Key: kv.Key, Delete: true}
		}
		if err := o.batch(muts); err != nil {
			return existed, err
		}
		if !more {
			return true, nil
		}
	}
}

func cmdDel(o *op, args [][]byte) error {
	keys := args[1:]
	for _, k := range keys {
		if err := o.checkKey(k, nil); err != nil {
			return err
		}
	}
	// A key named twice is deleted (and counted) once.
	uniq := make([][]byte, 0, len(keys))
	seen := map[string]bool{}
	for _, k := range keys {
		if !seen[string(k)] {
			seen[string(k)] = true
			uniq = append(uniq, k)
		}
	}
	existed := make([]bool, len(uniq))
	err := each(len(uniq), func(i int) error {
		var err error
		existed[i], err = o.delKey(uniq[i])
		return err
	})
	if err != nil {
		return err
	}
	n := int64(0)
	for _, e := range existed {
		n += b2i(e)
	}
	o.c.w.Int(n)
	return nil
}

func cmdExists(o *op, args [][]byte) error {
	keys := args[1:]
	for _, k := range keys {
		if err := o.checkKey(k, nil); err != nil {
			return err
		}
	}
	ex := make([]bool, len(keys))
	err := each(len(keys), func(i int) error {
		t, err := o.typeOf(keys[i])
		ex[i] = t != 0
		return err
	})
	if err != nil {
		return err
	}
	n := int64(0)
	for _, e := range ex {
		n += b2i(e) // a key named twice counts twice, as in Redis
	}
	o.c.w.Int(n)
	return nil
}

func cmdType(o *op, args [][]byte) error {
	if err := o.checkKey(args[1], nil); err != nil {
		return err
	}
	t, err := o.typeOf(args[1])
	if err != nil {
		return err
	}
	switch t {
	case 's':
		o.c.w.Simple("string")
	case 'h':
		o.c.w.Simple("hash")
	default:
		o.c.w.Simple("none")
	}
	return nil
}

// ---------- hashes ----------

// hashState is what readHash learned about hash k.
type hashState struct {
	isString bool              // k is a string
	fields   map[string][]byte // the fields asked for that exist (all fields when all was asked)
	order    []string          // with all: the fields in key order
}

// readHash reads hash k: the given fields, or all of them with all. Small hashes are read with one
// scan of the key's group (which also tells whether k is a string: its string key sorts first); when
// the group is larger than the scan's limit, the fields are read one by one.
func (o *op) readHash(k []byte, fields [][]byte, all bool) (*hashState, error) {
	st := &hashState{fields: map[string][]byte{}}
	start, end := groupSpan(k)
	limit := 0
	if !all {
		limit = 2*len(fields) + 64
	}
	kvs, more, err := o.scan(start, end, limit)
	if err != nil {
		return nil, err
	}
	if len(kvs) > 0 {
		if d, ok := decodeKey(kvs[0].Key); ok && d.tag == tagString {
			st.isString = true
			return st, nil
		}
	}
	if !more {
		want := map[string]bool{}
		for _, f := range fields {
			want[string(f)] = true
		}
		for _, kv := range kvs {
			d, ok := decodeKey(kv.Key)
			if !ok || d.tag != tagHashField || !bytes.Equal(d.key, k) {
				continue
			}
			if all || want[string(d.field)] {
				st.fields[string(d.field)] = kv.Value
				st.order = append(st.order, string(d.field))
			}
		}
		return st, nil
	}
	vals := make([][]byte, len(fields))
	found := make([]bool, len(fields))
	err = each(len(fields), func(i int) error {
		var err error
		vals[i], found[i], err = o.get(fieldKey(k, fields[i]))
		return err
	})
	if err != nil {
		return nil, err
	}
	for i, f := range fields {
		if found[i] {
			st.fields[string(f)] = vals[i]
		}
	}
	return st, nil
}

func (o *op) checkFields(k []byte, fields [][]byte) error {
	if err := o.checkKey(k, nil); err != nil {
		return err
	}
	for _, f := range fields {
		if err := o.checkKey(k, f); err != nil {
			return err
		}
	}
	return nil
}

// checkedHash checks the lengths of k and fields, reads hash k as readHash does, and refuses a
// string key with errWrongType.
func (o *op) checkedHash(k []byte, fields [][]byte, all bool) (*hashState, error) {
	if err := o.checkFields(k, fields); err != nil {
		return nil, err
	}
	st, err := o.readHash(k, fields, all)
	if err != nil {
		return nil, err
	}
	if st.isString {
		return nil, errWrongType
	}
	return st, nil
}

func (o *op) hset(args [][]byte) (int64, error) {
	if len(args)%2 != 0 {
		return 0, replyError(fmt.Sprintf("ERR wrong number of arguments for '%s' command", strings.ToLower(string(args[0]))))
	}
	k := args[1]
	var fields [][]byte
	vals := map[string][]byte{}
	for i := 2; i < len(args); i += 2 {
		f := args[i]
		if _, dup := vals[string(f)]; !dup {
			fields = append(fields, f)
		}
		vals[string(f)] = args[i+1] // the last value of a repeated field wins
	}
	st, err := o.checkedHash(k, fields, false)
	if err != nil {
		return 0, err
	}
	muts := make([]*pb.Mutation, len(fields))
	added := int64(0)
	for i, f := range fields {
		muts[i] = &pb.Mutation{Key: fieldKey(k, f), Value: vals[string(f)]}
		if _, ok := st.fields[string(f)]; !ok {
			added++
		}
	}
	return added, o.batch(muts)
}

func cmdHset(o *op, args [][]byte) error {
	n, err := o.hset(args)
	if err != nil {
		return err
	}
	o.c.w.Int(n)
	return nil
}

func cmdHmset(o *op, args [][]byte) error {
	if _, err := o.hset(args); err != nil {
		return err
	}
	o.c.w.Simple("OK")
	return nil
}

func cmdHget(o *op, args [][]byte) error {
	k, f := args[1], args[2]
	st, err := o.checkedHash(k, [][]byte{f}, false)
	if err != nil {
		return err
	}
	o.writeField(st, f)
	return nil
}

// writeField replies with the value of field f of st, or null when the hash does not have it.
func (o *op) writeField(st *hashState, f []byte) {
	if v, ok := st.fields[string(f)]; ok {
		o.c.w.Bulk(v)
	} else {
		o.c.w.Null()
	}
}

func cmdHmget(o *op, args [][]byte) error {
	k, fields := args[1], args[2:]
	st, err := o.checkedHash(k, fields, false)
	if err != nil {
		return err
	}
	o.c.w.Array(len(fields))
	for _, f := range fields {
		o.writeField(st, f)
	}
	return nil
}

func cmdHgetall(o *op, args [][]byte) error {
	k := args[1]
	st, err := o.checkedHash(k, nil, true)
	if err != nil {
		return err
	}
	o.c.w.Array(2 * len(st.order))
	for _, f := range st.order {
		o.c.w.BulkString(f)
		o.c.w.Bulk(st.fields[f])
	}
	return nil
}

func cmdHlen(o *op, args [][]byte) error {
	k := args[1]
	st, err := o.checkedHash(k, nil, true)
	if err != nil {
		return err
	}
	o.c.w.Int(int64(len(st.order)))
	return nil
}

func cmdHexists(o *op, args [][]byte) error {
	k, f := args[1], args[2]
	st, err := o.checkedHash(k, [][]byte{f}, false)
	if err != nil {
		return err
	}
	_, ok := st.fields[string(f)]
	o.c.w.Int(b2i(ok))
	return nil
}

func cmdHdel(o *op, args [][]byte) error {
	k := args[1]
	var fields [][]byte
	seen := map[string]bool{}
	for _, f := range args[2:] {
		if !seen[string(f)] {
			seen[string(f)] = true
			fields = append(fields, f)
		}
	}
	st, err := o.checkedHash(k, fields, false)
	if err != nil {
		return err
	}
	var muts []*pb.Mutation
	for _, f := range fields {
		if _, ok := st.fields[string(f)]; ok {
			muts = append(muts, &pb.Mutation{Key: fieldKey(k, f), Delete: true})
		}
	}
	if err := o.batch(muts); err != nil {
		return err
	}
	o.c.w.Int(int64(len(muts)))
	return nil
}

// ---------- key space ----------

// slotsToVisit are the slot intervals SCAN, KEYS, DBSIZE and FLUSHDB cover: every slot for a plain
// connection (this node forwards), the slots this node owns for a cluster connection (as with Redis
// Cluster, where these commands concern one node).
func (o *op) slotsToVisit() ([][2]int, error) {
	if !o.c.cluster {
		return [][2]int{{0, NumSlots - 1}}, nil
	}
	m, err := o.s.slotMap(o.ctx, slotMapMaxAge)
	if err != nil {
		return nil, err
	}
	return m.ownedBy(m.self), nil
}

// scanKeys visits the Redis keys of the slot intervals ivs from slot `from` on, in key order, calling
// fn with each key and the tag of its first Shoal key (tagString for a string). It stops when fn returns
// false, or once `want` keys (0: no bound) were visited and the slot of the last one is finished; it
// returns the first slot it has not finished (NumSlots when done).
func (o *op) scanKeys(ivs [][2]int, from, want int, fn func(d decodedKey, firstTag byte) bool) (int, error) {
	const batch = 512
	count := 0
	for _, iv := range ivs {
		if iv[1] < from {
			continue
		}
		first := max(iv[0], from)
		start, end := SlotStart(first), SlotStart(iv[1]+1)
		stopSlot := -1
		var lastGroup []byte
		for {
			kvs, more, err := o.scan(start, end, batch)
			if err != nil {
				return first, err
			}
			for _, kv := range kvs {
				d, ok := decodeKey(kv.Key)
				if !ok {
					continue
				}
				if stopSlot >= 0 && d.slot > stopSlot {
					return stopSlot + 1, nil
				}
				g := kv.Key[:d.group]
				if bytes.Equal(g, lastGroup) {
					continue
				}
				lastGroup = append(lastGroup[:0], g...)
				count++
				if !fn(d, d.tag) {
					return d.slot, nil
				}
				if want > 0 && count >= want && stopSlot < 0 {
					stopSlot = d.slot
				}
			}
			if !more || len(kvs) == 0 {
				break
			}
			lk := kvs[len(kvs)-1].Key
			if lastGroup != nil && bytes.HasPrefix(lk, lastGroup) {
				// Go on after the last key's group: its other Shoal keys (hash fields) add nothing.
				start = prefixEnd(lastGroup)
			} else {
				start = append(append([]byte(nil), lk...), 0)
			}
			if bytes.Compare(start, end) >= 0 {
				break
			}
		}
		if stopSlot >= 0 {
			return stopSlot + 1, nil
		}
	}
	return NumSlots, nil
}

func cmdScan(o *op, args [][]byte) error {
	cursor, err := strconv.ParseUint(string(args[1]), 10, 64)
	if err != nil {
		return replyError("ERR invalid cursor")
	}
	count := int64(10)
	var pattern []byte
	typ := ""
	for i := 2; i < len(args); i++ {
		switch {
		case eqFold(args[i], "match") && i+1 < len(args):
			pattern = args[i+1]
			i++
		case eqFold(args[i], "count") && i+1 < len(args):
			var ok bool
			if count, ok = wire.ParseInt(args[i+1]); !ok {
				return errNotInt
			}
			if count < 1 {
				return errSyntax
			}
			i++
		case eqFold(args[i], "type") && i+1 < len(args):
			typ = strings.ToLower(string(args[i+1]))
			i++
		default:
			return errSyntax
		}
	}
	if cursor >= NumSlots {
		return replyError("ERR invalid cursor")
	}
	ivs, err := o.slotsToVisit()
	if err != nil {
		return err
	}
	var keys [][]byte
	next, err := o.scanKeys(ivs, int(cursor), int(min(count, 1<<20)), func(d decodedKey, tag byte) bool {
		if typ != "" && !((typ == "string" && tag == tagString) || (typ == "hash" && tag == tagHashField)) {
			return true
		}
		if pattern == nil || glob.Match(pattern, d.key) {
			keys = append(keys, append([]byte(nil), d.key...))
		}
		return true
	})
	if err != nil {
		return err
	}
	if next >= NumSlots {
		next = 0
	}
	w := o.c.w
	w.Array(2)
	w.BulkString(strconv.Itoa(next))
	w.Array(len(keys))
	for _, k := range keys {
		w.Bulk(k)
	}
	return nil
}

func cmdKeys(o *op, args [][]byte) error {
	ivs, err := o.slotsToVisit()
	if err != nil {
		return err
	}
	var keys [][]byte
	_, err = o.scanKeys(ivs, 0, 0, func(d decodedKey, _ byte) bool {
		if glob.Match(args[1], d.key) {
			keys = append(keys, append([]byte(nil), d.key...))
		}
		return true
	})
	if err != nil {
		return err
	}
	o.c.w.Array(len(keys))
	for _, k := range keys {
		o.c.w.Bulk(k)
	}
	return nil
}

func cmdDbsize(o *op, _ [][]byte) error {
	n, err := o.countKeys()
	if err != nil {
		return err
	}
	o.c.w.Int(n)
	return nil
}

// countKeys counts the Redis keys of the slots the connection covers (see slotsToVisit).
func (o *op) countKeys() (int64, error) {
	ivs, err := o.slotsToVisit()
	if err != nil {
		return 0, err
	}
	n := int64(0)
	_, err = o.scanKeys(ivs, 0, 0, func(decodedKey, byte) bool { n++; return true })
	return n, err
}

// cmdFlushdb deletes every key of the slots the connection covers (see slotsToVisit), range by range
// in batches: concurrent writes may survive it, and it is not atomic.
func cmdFlushdb(o *op, args [][]byte) error {
	for _, a := range args[1:] {
		if !eqFold(a, "async") && !eqFold(a, "sync") {
			return errSyntax
		}
	}
	ivs, err := o.slotsToVisit()
	if err != nil {
		return err
	}
	for _, iv := range ivs {
		start, end := SlotStart(iv[0]), SlotStart(iv[1]+1)
		for {
			kvs, _, err := o.scan(start, end, 1000)
			if err != nil {
				return err
			}
			if len(kvs) == 0 {
				break
			}
			muts := make([]*pb.Mutation, len(kvs))
			for i, kv := range kvs {
				muts[i] = &pb.Mutation{Key: kv.Key, Delete: true}
			}
			if err := o.batch(muts); err != nil {
				return err
			}
			last := kvs[len(kvs)-1].Key
			start = append(append([]byte(nil), last...), 0)
		}
	}
	o.c.w.Simple("OK")
	return nil
}
