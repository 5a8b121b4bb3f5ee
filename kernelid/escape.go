package kernelid

import (
	"fmt"
	"strings"
)

// Escape writes s the way the vector files do: printable ASCII (0x20–0x7e)
// stays, except '\' which becomes `\\`; tab and newline become `\t` and `\n`;
// every other byte becomes `\xHH` with two lowercase hex digits. The result
// contains no tab, newline or non-ASCII byte and never a '"'-escape of its own,
// so it can be embedded in tab-separated or quoted fields.
func Escape(s string) string {
	const hexdigits = "0123456789abcdef"
	clean := true
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '\\' {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + len(s)/4)
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\':
			b.WriteString(`\\`)
		case c == '\t':
			b.WriteString(`\t`)
		case c == '\n':
			b.WriteString(`\n`)
		case c < 0x20 || c > 0x7e:
			b.WriteString(`\x`)
			b.WriteByte(hexdigits[c>>4])
			b.WriteByte(hexdigits[c&0xf])
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// Unescape reverses [Escape]. It accepts upper- and lowercase hex digits and
// any byte other than '\' literally; a '\' not followed by '\', 't', 'n' or
// 'x' and two hex digits is an error wrapping [ErrEscape].
func Unescape(s string) (string, error) {
	i := strings.IndexByte(s, '\\')
	if i < 0 {
		return s, nil
	}
	out := make([]byte, 0, len(s))
	out = append(out, s[:i]...)
	for ; i < len(s); i++ {
		c := s[i]
		if c != '\\' {
			out = append(out, c)
			continue
		}
		if i+1 >= len(s) {
			return "", fmt.Errorf("offset %d: trailing backslash: %w", i, ErrEscape)
		}
		switch s[i+1] {
		case '\\':
			out = append(out, '\\')
			i++
		case 't':
			out = append(out, '\t')
			i++
		case 'n':
			out = append(out, '\n')
			i++
		case 'x':
			if i+3 >= len(s) {
				return "", fmt.Errorf("offset %d: short \\x escape: %w", i, ErrEscape)
			}
			hi, ok1 := unhexAny(s[i+2])
			lo, ok2 := unhexAny(s[i+3])
			if !ok1 || !ok2 {
				return "", fmt.Errorf("offset %d: bad \\x escape: %w", i, ErrEscape)
			}
			out = append(out, hi<<4|lo)
			i += 3
		default:
			return "", fmt.Errorf("offset %d: unknown escape \\%c: %w", i, s[i+1], ErrEscape)
		}
	}
	return string(out), nil
}

func unhexAny(c byte) (byte, bool) {
	switch {
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10, true
	default:
		return unhex(c)
	}
}
