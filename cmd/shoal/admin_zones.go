package main

import (
	"encoding/hex"
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/shoaldb/shoal/autopilot/model"
	"github.com/shoaldb/shoal/cmd/shoal/internal/cli"
	"github.com/shoaldb/shoal/pb"
)

var zoneConfigFlags struct {
	leadZone   string
	start, end string
	clear      bool
}

var adminZoneConfigCmd = &cobra.Command{
	Use:   "zone-config",
	Short: "Show or set the zone each key span is to be led in",
	Long: `Without flags, list the leadership zone preferences. --lead-zone ZONE asks that the ranges within
[--start, --end) (both omitted: every range) be led by a replica in ZONE, a node's most specific
locality tier ("start --locality region=eu,zone=eu-1a" is in zone eu-1a); --clear removes the span's
preference. The narrowest span covering a range wins. The autopilot's lease_preference policy moves
the leaderships to a voter in the zone when the range has one there (replica placement decides which
zones hold voters), and rebalance never moves them out. Stored in the cluster; survives restarts.`,
	Example: `  shoal admin zone-config --lead-zone eu-1a
  shoal admin zone-config --lead-zone us-1b --start user --end userz
  shoal admin zone-config --clear --start user --end userz`,
	Args: cli.Args(cobra.NoArgs),
	RunE: func(cmd *cobra.Command, _ []string) error {
		f := zoneConfigFlags
		set := f.leadZone != "" || f.clear
		if f.leadZone != "" && f.clear {
			return cli.Usage(fmt.Errorf("--lead-zone and --clear exclude each other"))
		}
		if !set && (f.start != "" || f.end != "") {
			return cli.Usage(fmt.Errorf("--start and --end need --lead-zone or --clear"))
		}
		if f.end != "" && f.start >= f.end {
			return cli.Usage(fmt.Errorf("--start %q must sort before --end %q", f.start, f.end))
		}
		return withSession(cmd, func(s *session) error {
			var leads []*pb.LeadZone
			var err error
			if set {
				leads, err = s.c.SetLeadZone(s.ctx, []byte(f.start), []byte(f.end), f.leadZone)
			} else {
				leads, err = s.c.LeadZones(s.ctx)
			}
			if err != nil {
				return err
			}
			if cli.JSON() {
				out := []map[string]any{}
				for _, l := range leads {
					out = append(out, map[string]any{"start": hex.EncodeToString(l.StartKey),
						"end": hex.EncodeToString(l.EndKey), "zone": l.Zone})
				}
				return cli.WriteJSON(cmd.OutOrStdout(), out)
			}
			if len(leads) == 0 {
				fmt.Fprintln(cmd.OutOrStdout(), "no leadership zone preferences")
				return nil
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "SPAN\tLEAD ZONE")
			for _, l := range leads {
				fmt.Fprintf(tw, "%s\t%s\n", model.FormatSpan(l.StartKey, l.EndKey), l.Zone)
			}
			return tw.Flush()
		})
	},
}

func init() {
	fl := adminZoneConfigCmd.Flags()
	fl.StringVar(&zoneConfigFlags.leadZone, "lead-zone", "", "the zone to lead the span's ranges in")
	fl.StringVar(&zoneConfigFlags.start, "start", "", "the span's first key (default: the start of the key space)")
	fl.StringVar(&zoneConfigFlags.end, "end", "", "the key after the span (default: the end of the key space)")
	fl.BoolVar(&zoneConfigFlags.clear, "clear", false, "remove the span's preference")
	adminCmd.AddCommand(adminZoneConfigCmd)
}
