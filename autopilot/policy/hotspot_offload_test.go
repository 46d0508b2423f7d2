package policy

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/shoaldb/shoal/plan/hotspot"
)

// parseHotspotSeed reads measured hot spots for the data-driven tests: DUR:on|off:PENALTY items
// separated by "/" (a duration in seconds, whether the offload acted, the penalty in ms).
func parseHotspotSeed(v string) ([]hotspot.Point, error) {
	var out []hotspot.Point
	for _, item := range strings.Split(v, "/") {
		f := strings.Split(item, ":")
		if len(f) != 3 || (f[1] != "on" && f[1] != "off") {
			return nil, fmt.Errorf("hotspot-seed %q: want DUR:on|off:PENALTY", item)
		}
		d, err1 := strconv.ParseFloat(f[0], 64)
		pen, err2 := strconv.ParseFloat(f[2], 64)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("hotspot-seed %q: want numbers", item)
		}
		pt := hotspot.Point{DurationS: d, On: math.NaN(), Off: math.NaN()}
		if f[1] == "on" {
			pt.On = pen
		} else {
			pt.Off = pen
		}
		out = append(out, pt)
	}
	return out, nil
}
