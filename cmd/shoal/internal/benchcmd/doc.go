// Package benchcmd is the `shoal bench` command tree (ycsb, compare, scenario, pool, group-commit,
// idle-ranges, merge-plan) and `shoal sim`: the commands that run experiments and write reports.
// It owns their flags and output; the experiments themselves live in bench/ and sim/. It must never
// be needed to run or administer a cluster: nothing outside the experiment commands imports it.
package benchcmd

import "github.com/spf13/cobra"

// Commands are the top-level commands of this package, for the root command to add.
func Commands() []*cobra.Command { return []*cobra.Command{benchCmd, simCmd} }
