package kernelid

import (
	"errors"
	"testing"
)

func TestEscape(t *testing.T) {
	for _, v := range []struct{ raw, esc string }{
		{"", ""},
		{"plain text ~!", "plain text ~!"},
		{`a\b`, `a\\b`},
		{"a\tb\nc", `a\tb\nc`},
		{"\x00\x1f\x7f\x80\xff", `\x00\x1f\x7f\x80\xff`},
		{"é", `\xc3\xa9`},
		{`"q"`, `"q"`},
	} {
		if got := Escape(v.raw); got != v.esc {
			t.Errorf("Escape(%q) = %q, want %q", v.raw, got, v.esc)
		}
		if got, err := Unescape(v.esc); err != nil || got != v.raw {
			t.Errorf("Unescape(%q) = %q, %v; want %q", v.esc, got, err, v.raw)
		}
	}
	if got, err := Unescape(`\xAb\xcD`); err != nil || got != "\xab\xcd" {
		t.Errorf("Unescape of uppercase hex = %q, %v", got, err)
	}
	for _, bad := range []string{`\`, `a\`, `\x`, `\x4`, `\x4g`, `\r`, `\"`, `\u0041`} {
		if got, err := Unescape(bad); !errors.Is(err, ErrEscape) {
			t.Errorf("Unescape(%q) = %q, %v; want ErrEscape", bad, got, err)
		}
	}
}

func FuzzUnescape(f *testing.F) {
	f.Add(`plain`)
	f.Add(`a\\b\tc\nd\x00\xff\xAB`)
	f.Add(`\x`)
	f.Fuzz(func(t *testing.T, s string) {
		raw, err := Unescape(s)
		if err != nil {
			if !errors.Is(err, ErrEscape) {
				t.Fatalf("Unescape(%q): %v does not wrap ErrEscape", s, err)
			}
			return
		}
		esc := Escape(raw)
		if back, err := Unescape(esc); err != nil || back != raw {
			t.Fatalf("Unescape(Escape(%q)) = %q, %v", raw, back, err)
		}
		for i := 0; i < len(esc); i++ {
			if c := esc[i]; c < 0x20 || c > 0x7e {
				t.Fatalf("Escape(%q) = %q contains byte %#x", raw, esc, c)
			}
		}
	})
}
