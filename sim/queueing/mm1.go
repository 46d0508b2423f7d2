// Package queueing turns a node's offered load into the latency its requests see, with the M/M/1
// queue: Poisson arrivals (many independent clients), one server whose service time is exponential
// with the node's measured mean, first come first served. Its sojourn time (queueing plus service) is
// exponential with rate μ−λ, so the mean, every percentile and the percentiles of a mixture of nodes
// have closed forms: a simulator evaluates them per node per second in O(1), at any cluster size.
//
// The package owns the formulas. It must never keep state, read a clock or know about ranges: the
// caller says how much load each node offers and how fast it serves.
package queueing

import (
	"math"
	"time"
)

// MaxUtilization is the utilization a node is held to: load beyond it is not served (a real node's
// admission gates answer OVERLOADED), so that the model never evaluates a queue at or past ρ = 1,
// where M/M/1's latency is infinite.
const MaxUtilization = 0.98

// Server is one node's request server: Mu requests per second at full utilization.
type Server struct{ Mu float64 }

// Served is the part of offered load lambda the server serves (at most MaxUtilization·Mu).
func (s Server) Served(lambda float64) float64 {
	if lambda <= 0 || s.Mu <= 0 {
		return 0
	}
	return math.Min(lambda, MaxUtilization*s.Mu)
}

// Utilization is ρ = λ/μ of the served load.
func (s Server) Utilization(lambda float64) float64 {
	if s.Mu <= 0 {
		return 0
	}
	return s.Served(lambda) / s.Mu
}

// Rate is the rate of the exponential sojourn time of the served load, μ − λ (per second).
func (s Server) Rate(lambda float64) float64 { return s.Mu - s.Served(lambda) }

// Mean is the mean sojourn time, 1/(μ−λ).
func (s Server) Mean(lambda float64) time.Duration { return seconds(1 / s.Rate(lambda)) }

// Quantile is the q-quantile of the sojourn time, −ln(1−q)/(μ−λ).
func (s Server) Quantile(lambda, q float64) time.Duration {
	return seconds(-math.Log1p(-q) / s.Rate(lambda))
}

// Part is one server's share of a mixture: Weight of the requests see an exponential sojourn of Rate.
type Part struct{ Weight, Rate float64 }

// MixtureQuantile is the q-quantile of the sojourn time of requests spread over servers with the given
// weights (their served loads): the t with Σ wᵢ(1 − e^{−rᵢt}) = q·Σ wᵢ, found by bisection to 0.1 µs.
// It returns 0 when no part has weight.
func MixtureQuantile(parts []Part, q float64) time.Duration {
	var total, slowest float64
	for _, p := range parts {
		if p.Weight > 0 && p.Rate > 0 {
			total += p.Weight
			if slowest == 0 || p.Rate < slowest {
				slowest = p.Rate
			}
		}
	}
	if total == 0 {
		return 0
	}
	cdf := func(t float64) float64 {
		var f float64
		for _, p := range parts {
			if p.Weight > 0 && p.Rate > 0 {
				f += p.Weight * -math.Expm1(-p.Rate*t)
			}
		}
		return f / total
	}
	lo, hi := 0.0, -math.Log1p(-q)/slowest // every part is below q by then
	for hi-lo > 1e-7 {
		mid := (lo + hi) / 2
		if cdf(mid) < q {
			lo = mid
		} else {
			hi = mid
		}
	}
	return seconds(hi)
}

func seconds(s float64) time.Duration {
	if math.IsInf(s, 0) || s > float64(math.MaxInt64/int64(time.Second)) {
		return time.Duration(math.MaxInt64)
	}
	return time.Duration(s * float64(time.Second))
}
