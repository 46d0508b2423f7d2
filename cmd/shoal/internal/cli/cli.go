// Package cli holds what every `shoal` command shares: the root's persistent flags, the usage-error
// type that makes the process exit with code 2, argument validation that says so, and the output
// helpers (JSON or text), and the client configuration those flags give. It owns no command and must
// never dial a node: commands do that.
package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

// Global holds the root's persistent flags, shared by every client command.
var Global struct {
	Host      string
	Format    string
	AuthToken string
	CertsDir  string
	Timeout   time.Duration
}

// ValidateGlobal rejects bad values of the persistent flags, for every command.
func ValidateGlobal(*cobra.Command, []string) error {
	switch Global.Format {
	case "text", "json":
	default:
		return Usage(fmt.Errorf("invalid --format %q: use text or json", Global.Format))
	}
	if Global.Timeout <= 0 {
		return Usage(fmt.Errorf("invalid --timeout %v: must be positive", Global.Timeout))
	}
	return nil
}

// UsageError marks an error in how the command was invoked (exit code 2).
type UsageError struct{ Err error }

func (e UsageError) Error() string { return e.Err.Error() }
func (e UsageError) Unwrap() error { return e.Err }

// Usage wraps err as a UsageError.
func Usage(err error) error { return UsageError{Err: err} }

// Args wraps a cobra positional-argument validator so that its failures are usage errors that show
// the command's usage line.
func Args(v cobra.PositionalArgs) cobra.PositionalArgs {
	return func(cmd *cobra.Command, a []string) error {
		if err := v(cmd, a); err != nil {
			return Usage(fmt.Errorf("%s: %d argument(s) given; usage: %s", cmd.Name(), len(a), cmd.UseLine()))
		}
		return nil
	}
}

// GroupRunE runs a command that only groups others: without arguments it prints its help, with an
// unknown one it fails as a usage error that suggests the nearest commands.
func GroupRunE(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
		if cmd.SuggestionsMinimumDistance <= 0 {
			cmd.SuggestionsMinimumDistance = 2
		}
		if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
			msg += "\n\nDid you mean this?\n\t" + strings.Join(s, "\n\t") + "\n"
		}
		return Usage(errors.New(msg))
	}
	return cmd.Help()
}

// JSON reports whether --format json was chosen.
func JSON() bool { return Global.Format == "json" }

// WriteJSON writes v as one line of JSON (HTML characters left as they are).
func WriteJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// PrintIndented prints v as indented JSON on standard output.
func PrintIndented(v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	fmt.Println(string(b))
	return nil
}

// Number prints a whole number as such and anything else with one decimal.
func Number(v float64) string {
	if v == math.Trunc(v) && math.Abs(v) < 1e15 {
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	return strconv.FormatFloat(v, 'f', 1, 64)
}

// HumanBytes is b in the largest binary unit under it (B, KiB, MiB, GiB).
func HumanBytes(b uint64) string {
	switch {
	case b >= 1<<30:
		return fmt.Sprintf("%.2f GiB", float64(b)/(1<<30))
	case b >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20))
	case b >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(b)/(1<<10))
	}
	return fmt.Sprintf("%d B", b)
}
