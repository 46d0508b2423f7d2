package tpcc

import (
	"fmt"
	"math/bits"
	"math/rand/v2"
)

// Kind is one of the five transactions.
type Kind int

// The transactions, in the order of the spec's mix.
const (
	NewOrder Kind = iota
	Payment
	OrderStatus
	Delivery
	StockLevel
	numKinds
)

var kindNames = [numKinds]string{"new_order", "payment", "order_status", "delivery", "stock_level"}

// String is the transaction's name in reports.
func (k Kind) String() string {
	if k >= 0 && k < numKinds {
		return kindNames[k]
	}
	return fmt.Sprintf("kind(%d)", int(k))
}

// Kinds lists the transactions in mix order.
func Kinds() []Kind { return []Kind{NewOrder, Payment, OrderStatus, Delivery, StockLevel} }

// MixPercent is each transaction's share of the mix, in percent: the spec's minimums for the four
// others (43, 4, 4, 4), new-order taking the rest.
var MixPercent = [numKinds]int{45, 43, 4, 4, 4}

// Input generates a worker's random inputs as TPC-C's clause 2 and 4.3 describe them.
type Input struct {
	r *rand.Rand
	// C constants of NURand, drawn once per run.
	cLast, cID, olIID int64
}

// NewInput returns an input generator seeded with seed (two workers with two seeds draw apart).
func NewInput(seed uint64) *Input {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	return &Input{r: r, cLast: r.Int64N(256), cID: r.Int64N(1024), olIID: r.Int64N(8192)}
}

// Uniform is a random integer in [x, y].
func (in *Input) Uniform(x, y int64) int64 { return x + in.r.Int64N(y-x+1) }

// Float is a random float in [x, y), rounded to cents.
func (in *Input) Float(x, y float64) float64 {
	return float64(int64((x+in.r.Float64()*(y-x))*100)) / 100
}

// Pick draws a transaction by MixPercent.
func (in *Input) Pick() Kind {
	n := in.r.IntN(100)
	for k, p := range MixPercent {
		if n < p {
			return Kind(k)
		}
		n -= p
	}
	return NewOrder
}

// NURand is TPC-C's non-uniform random number in [x, y]: (((random(0, A) | random(x, y)) + C) %
// (y − x + 1)) + x.
func NURand(r *rand.Rand, a, c, x, y int64) int64 {
	return ((r.Int64N(a+1)|(x+r.Int64N(y-x+1)))+c)%(y-x+1) + x
}

// ScaledA is NURand's A for a range of n values: the spec's A, or for a range scaled down below
// it the largest 2^k − 1 under n, so that the skew spans the smaller range as it spans the spec's.
func ScaledA(specA, n int64) int64 {
	if n <= 1 {
		return 0
	}
	a := int64(1)<<(63-bits.LeadingZeros64(uint64(n))) - 1
	return min(specA, a)
}

// CustomerID draws a customer id in [1, customers] (NURand with A = 1023 at full size).
func (in *Input) CustomerID(customers int) int64 {
	return NURand(in.r, ScaledA(1023, int64(customers)), in.cID, 1, int64(customers))
}

// ItemID draws an item id in [1, items] (NURand with A = 8191 at full size).
func (in *Input) ItemID(items int) int64 {
	return NURand(in.r, ScaledA(8191, int64(items)), in.olIID, 1, int64(items))
}

// LastNameNumber draws the number of a customer's last name in [0, min(999, customers − 1)]
// (NURand with A = 255 at full size): the numbers the loader gave names to.
func (in *Input) LastNameNumber(customers int) int64 {
	n := min(int64(customers), 1000)
	return NURand(in.r, ScaledA(255, n), in.cLast, 0, n-1)
}

var syllables = [10]string{"BAR", "OUGHT", "ABLE", "PRI", "PRES", "ESE", "ANTI", "CALLY", "ATION", "EING"}

// LastName is the customer last name of number n in [0, 999]: the syllables of its three digits.
func LastName(n int64) string {
	return syllables[n/100%10] + syllables[n/10%10] + syllables[n%10]
}

const alnum = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"

// AString is a random alphanumeric string of length in [lo, hi].
func (in *Input) AString(lo, hi int) string {
	b := make([]byte, lo+in.r.IntN(hi-lo+1))
	for i := range b {
		b[i] = alnum[in.r.IntN(len(alnum))]
	}
	return string(b)
}

// NString is a random numeric string of length in [lo, hi].
func (in *Input) NString(lo, hi int) string {
	b := make([]byte, lo+in.r.IntN(hi-lo+1))
	for i := range b {
		b[i] = byte('0' + in.r.IntN(10))
	}
	return string(b)
}

// Zip is a zip code: four random digits and "11111".
func (in *Input) Zip() string { return in.NString(4, 4) + "11111" }

// Data is an i_data or s_data string: 26–50 characters, 10 % of them holding "ORIGINAL".
func (in *Input) Data() string {
	s := in.AString(26, 50)
	if in.r.IntN(10) == 0 {
		at := in.r.IntN(len(s) - 8)
		s = s[:at] + "ORIGINAL" + s[at+8:]
	}
	return s
}

// Percent reports true with probability p percent.
func (in *Input) Percent(p int) bool { return in.r.IntN(100) < p }

// OtherWarehouse is a warehouse in [1, warehouses] other than w (w itself when it is the only one).
func (in *Input) OtherWarehouse(w int64, warehouses int) int64 {
	if warehouses <= 1 {
		return w
	}
	o := in.Uniform(1, int64(warehouses-1))
	if o >= w {
		o++
	}
	return o
}

// Int63 is a random non-negative int64.
func (in *Input) Int63() int64 { return in.r.Int64() }
