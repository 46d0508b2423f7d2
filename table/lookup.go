package table

// DescriptorKey is the kv key of the descriptor of the table named name: what a reader outside the
// catalog (a node's scan job, which reads through the range layer rather than a client) reads to find
// a table's rows.
func DescriptorKey(name string) []byte { return descKey(name) }

// DecodeDescriptor decodes the value stored at DescriptorKey(name).
func DecodeDescriptor(name string, b []byte) (Descriptor, error) { return decodeDescriptor(name, b) }
