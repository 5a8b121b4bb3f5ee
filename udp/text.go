package udp

import (
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"

	"github.com/fikit/fikit/kernelid"
)

// The text form of a message, used by testdata/vectors.txt and for logging:
//
//	<Type> <field>=<value> …
//
// with the type and field names of docs/design.md and values written as
// decimal integers, "…" strings (escapes \\ \t \n \xHH of kernelid.Escape,
// and '"' written as \x22), hex:… for the 16-byte UUID, [a,b,c] for grid and
// block, [[id,dur,gap,flags];…] for measurement records, [[id,offset];…]
// for a LaunchBatch's launches and [[id,duration];…] for KernelTimes'
// kernels ([] if none).

// Format returns the text form of m, fields in wire order.
func Format(m Message) string {
	t := m.Type()
	sch := schemaOf(t)
	if sch == nil {
		return t.String()
	}
	var v values
	m.put(&v)
	var b strings.Builder
	b.WriteString(t.String())
	for i, f := range present(sch, &v) {
		b.WriteByte(' ')
		b.WriteString(f.name)
		b.WriteByte('=')
		switch f.kind {
		case kUint:
			b.WriteString(strconv.FormatUint(v.u[i], 10))
		case kStr:
			b.WriteString(quote(v.s[i]))
		case kBin16:
			b.WriteString("hex:")
			b.WriteString(hex.EncodeToString(v.uuid[:]))
		case kTriple:
			fmt.Fprintf(&b, "[%d,%d,%d]", v.t[i][0], v.t[i][1], v.t[i][2])
		case kRecords:
			b.WriteByte('[')
			for j, r := range v.r {
				if j > 0 {
					b.WriteByte(';')
				}
				fmt.Fprintf(&b, "[%d,%d,%d,%d]", r.KernelID, r.DurationNS, r.GapNS, r.Flags)
			}
			b.WriteByte(']')
		case kLaunches:
			b.WriteByte('[')
			for j, l := range v.l {
				if j > 0 {
					b.WriteByte(';')
				}
				fmt.Fprintf(&b, "[%d,%d]", l.KernelID, l.OffsetNS)
			}
			b.WriteByte(']')
		case kKernelTimes:
			b.WriteByte('[')
			for j, k := range v.k {
				if j > 0 {
					b.WriteByte(';')
				}
				fmt.Fprintf(&b, "[%d,%d]", k.KernelID, k.DurationNS)
			}
			b.WriteByte(']')
		}
	}
	return b.String()
}

func quote(s string) string {
	return `"` + strings.ReplaceAll(kernelid.Escape(s), `"`, `\x22`) + `"`
}

func unquote(s string) (string, error) {
	if len(s) < 2 || s[0] != '"' || s[len(s)-1] != '"' || strings.Contains(s[1:len(s)-1], `"`) {
		return "", fmt.Errorf("%q is not a quoted string: %w", s, ErrSyntax)
	}
	u, err := kernelid.Unescape(s[1 : len(s)-1])
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrSyntax, err)
	}
	return u, nil
}

// ParseText reads the text form of a message. Every field of the type must
// be given exactly once, in any order. Errors wrap ErrSyntax, or ErrRange
// for a value outside its field's range.
func ParseText(s string) (Message, error) {
	tokens, err := splitText(s)
	if err != nil {
		return nil, err
	}
	if len(tokens) == 0 {
		return nil, fmt.Errorf("parse: empty: %w", ErrSyntax)
	}
	t, ok := typeByName(tokens[0])
	if !ok {
		return nil, fmt.Errorf("parse: unknown type %q: %w", tokens[0], ErrSyntax)
	}
	sch := messages[t].fields
	var v values
	var seen [maxFields]bool
	for _, tok := range tokens[1:] {
		name, val, ok := strings.Cut(tok, "=")
		i := fieldIndex(sch, name)
		switch {
		case !ok:
			return nil, fmt.Errorf("parse %v: %q is not field=value: %w", t, tok, ErrSyntax)
		case i < 0:
			return nil, fmt.Errorf("parse %v: unknown field %q: %w", t, name, ErrSyntax)
		case seen[i]:
			return nil, fmt.Errorf("parse %v: %s given twice: %w", t, name, ErrSyntax)
		}
		seen[i] = true
		if err := parseValue(&v, i, sch[i], val); err != nil {
			return nil, fmt.Errorf("parse %v: %s: %w", t, name, err)
		}
	}
	for i, f := range sch {
		if !seen[i] && !f.opt {
			return nil, fmt.Errorf("parse %v: %s: %w", t, f.name, ErrMissingField)
		}
	}
	m := newMessage(t)
	m.get(&v)
	return m, nil
}

func typeByName(name string) (Type, bool) {
	for t, m := range messages {
		if m.name != "" && m.name == name {
			return Type(t), true
		}
	}
	return 0, false
}

func fieldIndex(sch []field, name string) int {
	for i, f := range sch {
		if f.name == name {
			return i
		}
	}
	return -1
}

// splitText splits s at runs of spaces outside double quotes.
func splitText(s string) ([]string, error) {
	var tokens []string
	start, quoted := -1, false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"':
			quoted = !quoted
		case c == ' ' && !quoted:
			if start >= 0 {
				tokens = append(tokens, s[start:i])
				start = -1
			}
			continue
		}
		if start < 0 {
			start = i
		}
	}
	if quoted {
		return nil, fmt.Errorf("parse: unterminated string: %w", ErrSyntax)
	}
	if start >= 0 {
		tokens = append(tokens, s[start:])
	}
	return tokens, nil
}

func parseUint(s string, f field) (uint64, error) {
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil || (len(s) > 1 && s[0] == '0') || s[0] == '+' {
		return 0, fmt.Errorf("%q is not a decimal integer: %w", s, ErrSyntax)
	}
	if v < f.lo || v > f.hi {
		return 0, fmt.Errorf("%d not in [%d, %d]: %w", v, f.lo, f.hi, ErrRange)
	}
	return v, nil
}

// bracketed returns the inside of "[…]".
func bracketed(s string) (string, error) {
	if len(s) < 2 || s[0] != '[' || s[len(s)-1] != ']' {
		return "", fmt.Errorf("%q is not [...]: %w", s, ErrSyntax)
	}
	return s[1 : len(s)-1], nil
}

func parseValue(v *values, i int, f field, s string) error {
	switch f.kind {
	case kUint:
		x, err := parseUint(s, f)
		v.u[i] = x
		return err
	case kStr:
		x, err := unquote(s)
		v.s[i] = x
		return err
	case kBin16:
		h, ok := strings.CutPrefix(s, "hex:")
		if !ok || len(h) != 32 {
			return fmt.Errorf("%q is not hex: and 32 hex digits: %w", s, ErrSyntax)
		}
		if _, err := hex.Decode(v.uuid[:], []byte(h)); err != nil {
			return fmt.Errorf("%q: %w", s, ErrSyntax)
		}
		return nil
	case kTriple:
		in, err := bracketed(s)
		if err != nil {
			return err
		}
		parts := strings.Split(in, ",")
		if len(parts) != 3 {
			return fmt.Errorf("%q is not [a,b,c]: %w", s, ErrSyntax)
		}
		for j, p := range parts {
			x, err := parseUint(p, u32(f.name))
			if err != nil {
				return err
			}
			v.t[i][j] = uint32(x)
		}
		return nil
	case kRecords:
		in, err := bracketed(s)
		if err != nil || in == "" {
			return err
		}
		for rs := range strings.SplitSeq(in, ";") {
			rin, err := bracketed(rs)
			if err != nil {
				return err
			}
			parts := strings.Split(rin, ",")
			if len(parts) != 4 {
				return fmt.Errorf("record %q is not [id,dur,gap,flags]: %w", rs, ErrSyntax)
			}
			var x [4]uint64
			for k, p := range parts {
				if x[k], err = parseUint(p, recordFields[k]); err != nil {
					return fmt.Errorf("record %q: %w", rs, err)
				}
			}
			v.r = append(v.r, Record{KernelID: x[0], DurationNS: x[1], GapNS: x[2], Flags: RecordFlags(x[3])})
		}
		return nil
	case kLaunches:
		return parsePairs(s, "launch", "[id,offset]", &launchFields, func(a, b uint64) {
			v.l = append(v.l, Launch{KernelID: a, OffsetNS: uint32(b)})
		})
	case kKernelTimes:
		return parsePairs(s, "kernel", "[id,duration]", &kernelTimeFields, func(a, b uint64) {
			v.k = append(v.k, KernelTime{KernelID: a, DurationNS: uint32(b)})
		})
	}
	panic("udp: unknown field kind")
}

// parsePairs reads [[a,b];…] of two-field elements (what, written form, for
// errors), giving each to add.
func parsePairs(s, what, form string, fields *[2]field, add func(a, b uint64)) error {
	in, err := bracketed(s)
	if err != nil || in == "" {
		return err
	}
	for es := range strings.SplitSeq(in, ";") {
		ein, err := bracketed(es)
		if err != nil {
			return err
		}
		parts := strings.Split(ein, ",")
		if len(parts) != 2 {
			return fmt.Errorf("%s %q is not %s: %w", what, es, form, ErrSyntax)
		}
		var x [2]uint64
		for k, p := range parts {
			if x[k], err = parseUint(p, fields[k]); err != nil {
				return fmt.Errorf("%s %q: %w", what, es, err)
			}
		}
		add(x[0], x[1])
	}
	return nil
}
