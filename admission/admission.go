package admission

// Config bounds the client work a node holds (docs/design/admission.md). Beyond the limits clients get
// OVERLOADED at once, which they retry with backoff. Zero limits take the defaults.
type Config struct {
	// Disabled turns both gates off (they still count, for the metrics). For comparisons only.
	Disabled bool
	// Requests bounds client requests being served (default DefaultRequests).
	Requests Limits
	// Proposals bounds user writes held in raft, proposed and not yet applied (default
	// DefaultProposals).
	Proposals Limits
}

// Default limits of Config.
var (
	DefaultRequests  = Limits{Count: 4096, Bytes: 128 << 20}
	DefaultProposals = Limits{Count: 4096, Bytes: 64 << 20}
)

// WithDefaults returns c with zero limits set to the defaults.
func (c Config) WithDefaults() Config {
	if c.Requests.Count == 0 {
		c.Requests.Count = DefaultRequests.Count
	}
	if c.Requests.Bytes == 0 {
		c.Requests.Bytes = DefaultRequests.Bytes
	}
	if c.Proposals.Count == 0 {
		c.Proposals.Count = DefaultProposals.Count
	}
	if c.Proposals.Bytes == 0 {
		c.Proposals.Bytes = DefaultProposals.Bytes
	}
	return c
}

// RequestLimits and ProposalLimits are the limits the gates enforce (none when disabled).
func (c Config) RequestLimits() Limits {
	if c.Disabled {
		return Limits{}
	}
	return c.Requests
}

// ProposalLimits: see RequestLimits.
func (c Config) ProposalLimits() Limits {
	if c.Disabled {
		return Limits{}
	}
	return c.Proposals
}
