package linearroad

import "math/rand/v2"

// SegmentFeet is a segment's length (a mile).
const SegmentFeet = 5280

// Generator simulates vehicles on expressways: every tick (30 simulated seconds, two a minute) each
// vehicle reports its position; a vehicle leaving the last segment enters again at the first, as the
// thesis's generator keeps the number of vehicles constant.
type Generator struct {
	rng      *rand.Rand
	segments int
	vehicles []vehicle
	tick     uint32
}

type vehicle struct {
	xway, dir uint8
	pos       uint32
	speed     uint8
	stopped   int // ticks left standing (a breakdown: two in one spot make an accident)
	seg       int // segment of the last report (-1: none yet)
}

// NewGenerator places n vehicles at random on xways expressways of segments segments each way.
func NewGenerator(seed uint64, n, xways, segments int) *Generator {
	g := &Generator{rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), segments: segments}
	for i := 0; i < n; i++ {
		g.vehicles = append(g.vehicles, vehicle{xway: uint8(g.rng.IntN(xways)), dir: uint8(g.rng.IntN(2)),
			pos: uint32(g.rng.IntN(segments * SegmentFeet)), speed: g.speed(), seg: -1})
	}
	return g
}

// speed draws a speed: mostly 20–80 mph, so that congested minutes (under 40) occur.
func (g *Generator) speed() uint8 { return uint8(20 + g.rng.IntN(61)) }

// Tick moves every vehicle by one tick and returns their reports.
func (g *Generator) Tick() []Report {
	reports := make([]Report, 0, len(g.vehicles))
	minute := g.tick / 2
	for i := range g.vehicles {
		v := &g.vehicles[i]
		switch {
		case v.stopped > 0:
			v.stopped--
			if v.stopped == 0 {
				v.speed = g.speed()
			}
		case g.rng.IntN(2000) == 0: // a breakdown, at the next 4-foot mark, for 5 ticks
			v.stopped, v.speed = 5, 0
			v.pos -= v.pos % 4
		default:
			if g.rng.IntN(4) == 0 {
				v.speed = g.speed()
			}
			v.pos += uint32(v.speed) * SegmentFeet / 120 // 30 s at speed mph
			if v.pos >= uint32(g.segments*SegmentFeet) {
				v.pos %= uint32(g.segments * SegmentFeet)
			}
		}
		seg := int(v.pos / SegmentFeet)
		reports = append(reports, Report{Vehicle: uint32(i), Xway: v.xway, Dir: v.dir, Seg: uint8(seg), Pos: v.pos,
			Speed: v.speed, Minute: minute, Crossing: seg != v.seg})
		v.seg = seg
	}
	g.tick++
	return reports
}
