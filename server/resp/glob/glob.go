// Package glob matches Redis's glob-style patterns (KEYS, SCAN MATCH, CONFIG GET): * ? [abc] [^abc]
// [a-z] and \ escapes, with the semantics of Redis's stringmatchlen.
package glob

// globToken is one element of a compiled glob pattern.
type globToken struct {
	kind   byte // '*' any run, '?' any byte, '[' class, 'c' literal
	lit    byte
	neg    bool
	ranges [][2]byte // class: inclusive byte ranges (single bytes as [c, c])
}

// compileGlob parses a Redis glob pattern: * ? [abc] [^abc] [a-z] and \ escapes, like Redis's
// stringmatchlen (an unterminated class takes the rest of the pattern).
func compileGlob(p []byte) []globToken {
	var toks []globToken
	for i := 0; i < len(p); i++ {
		switch p[i] {
		case '*':
			if n := len(toks); n == 0 || toks[n-1].kind != '*' {
				toks = append(toks, globToken{kind: '*'})
			}
		case '?':
			toks = append(toks, globToken{kind: '?'})
		case '[':
			t := globToken{kind: '['}
			i++
			if i < len(p) && p[i] == '^' {
				t.neg = true
				i++
			}
			for ; i < len(p) && p[i] != ']'; i++ {
				switch {
				case p[i] == '\\' && i+1 < len(p):
					i++
					t.ranges = append(t.ranges, [2]byte{p[i], p[i]})
				case i+2 < len(p) && p[i+1] == '-':
					lo, hi := p[i], p[i+2]
					if lo > hi {
						lo, hi = hi, lo
					}
					t.ranges = append(t.ranges, [2]byte{lo, hi})
					i += 2
				default:
					t.ranges = append(t.ranges, [2]byte{p[i], p[i]})
				}
			}
			toks = append(toks, t)
		case '\\':
			if i+1 < len(p) {
				i++
			}
			toks = append(toks, globToken{kind: 'c', lit: p[i]})
		default:
			toks = append(toks, globToken{kind: 'c', lit: p[i]})
		}
	}
	return toks
}

func (t *globToken) matches(c byte) bool {
	switch t.kind {
	case '?':
		return true
	case 'c':
		return t.lit == c
	case '[':
		in := false
		for _, r := range t.ranges {
			if c >= r[0] && c <= r[1] {
				in = true
				break
			}
		}
		return in != t.neg
	}
	return false
}

// Match reports whether s matches the Redis glob pattern p. It runs in O(len(p)·len(s)): every
// token other than * matches exactly one byte, so backtracking to the last * is enough.
func Match(p, s []byte) bool {
	toks := compileGlob(p)
	ti, si := 0, 0
	star, starS := -1, 0
	for si < len(s) {
		switch {
		case ti < len(toks) && toks[ti].kind == '*':
			star, starS = ti, si
			ti++
		case ti < len(toks) && toks[ti].matches(s[si]):
			ti++
			si++
		case star >= 0:
			starS++
			si = starS
			ti = star + 1
		default:
			return false
		}
	}
	for ti < len(toks) && toks[ti].kind == '*' {
		ti++
	}
	return ti == len(toks)
}
