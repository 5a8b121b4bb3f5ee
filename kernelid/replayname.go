package kernelid

import (
	"strings"
)

// ReplayPrefix starts every PTX entry name the trace replayer generates.
const ReplayPrefix = "fkr_"

// ReplayEntryName turns a kernel name from a trace ("void at::vectorized_elementwise_kernel")
// into a valid PTX identifier that still carries the original name:
// ASCII letters and digits stay, '_' becomes "__", every other byte becomes '_'
// followed by two lowercase hex digits. ReplayOriginalName reverses it.
func ReplayEntryName(name string) string {
	const hexdigits = "0123456789abcdef"
	var b strings.Builder
	b.Grow(len(ReplayPrefix) + len(name) + len(name)/2)
	b.WriteString(ReplayPrefix)
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
			b.WriteByte(c)
		case c == '_':
			b.WriteString("__")
		default:
			b.WriteByte('_')
			b.WriteByte(hexdigits[c>>4])
			b.WriteByte(hexdigits[c&0xf])
		}
	}
	return b.String()
}

// ReplayOriginalName recovers the trace name from a ReplayEntryName identifier.
// It reports false for any name that is not a well-formed replay entry name.
func ReplayOriginalName(entry string) (string, bool) {
	if !strings.HasPrefix(entry, ReplayPrefix) {
		return "", false
	}
	s := entry[len(ReplayPrefix):]
	out := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
			out = append(out, c)
		case c == '_':
			if i+1 < len(s) && s[i+1] == '_' {
				out = append(out, '_')
				i++
				continue
			}
			if i+2 >= len(s) {
				return "", false
			}
			hi, ok1 := unhex(s[i+1])
			lo, ok2 := unhex(s[i+2])
			if !ok1 || !ok2 {
				return "", false
			}
			v := hi<<4 | lo
			if isIdentByte(v) { // would have been written literally
				return "", false
			}
			out = append(out, v)
			i += 2
		default:
			return "", false
		}
	}
	return string(out), true
}

func isIdentByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_'
}

func unhex(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	}
	return 0, false
}
