package main

import (
	"github.com/spf13/cobra"

	"github.com/shoaldb/shoal/server/resp"
)

// redisKey is --redis of put, get and del: KEY names a Redis key (a string), stored where the RESP
// listener keeps it, under its hash slot (resp.KeyFor). Without it KEY is a Shoal key, which redis-cli
// does not see.
var redisKey bool

func init() {
	for _, c := range []*cobra.Command{putCmd, getCmd, delCmd, ttlCmd} {
		c.Flags().BoolVar(&redisKey, "redis", false, "KEY is a Redis key: the string value redis-cli reads and writes through a node's --resp listener")
		c.Example += "\n  shoal " + c.Name() + " --redis " + map[string]string{"put": "user:1 alice", "get": "user:1", "del": "user:1", "ttl": "user:1"}[c.Name()]
		run := c.RunE
		c.RunE = func(cmd *cobra.Command, a []string) error {
			if redisKey && len(a) > 0 {
				a = append([]string{string(resp.KeyFor([]byte(a[0])))}, a[1:]...)
			}
			return run(cmd, a)
		}
	}
}
