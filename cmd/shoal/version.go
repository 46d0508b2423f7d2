package main

import (
	"fmt"
	"runtime"

	"github.com/spf13/cobra"

	"github.com/shoaldb/shoal/cmd/shoal/internal/cli"
	"github.com/shoaldb/shoal/version"
)

var versionCmd = &cobra.Command{
	Use:   "version",
	Short: "Print the version of this shoal binary",
	Long: `Print the version of this binary: the release it was built as, or "devel-<commit>" for a build
from a source tree ("-dirty" when the tree had uncommitted changes), and the Go toolchain. With
--format json, print {"version","revision","go"}. "shoal --version" prints the same line.`,
	Example: `  shoal version
  shoal version --format json`,
	Args: cli.Args(cobra.NoArgs),
	RunE: func(cmd *cobra.Command, _ []string) error {
		if cli.JSON() {
			return cli.WriteJSON(cmd.OutOrStdout(), version.Get())
		}
		_, err := fmt.Fprintln(cmd.OutOrStdout(), versionLine())
		return err
	},
}

// versionLine is the one line `shoal version` and `shoal --version` print.
func versionLine() string {
	i := version.Get()
	line := "shoal " + i.String()
	if i.Revision != "" && i.Version != "devel" {
		line += " (" + i.Revision + ")"
	}
	return line + fmt.Sprintf(" %s %s/%s", i.GoVersion, runtime.GOOS, runtime.GOARCH)
}

func init() {
	rootCmd.Version = version.String()
	rootCmd.SetVersionTemplate(versionLine() + "\n")
	rootCmd.AddCommand(versionCmd)
}
