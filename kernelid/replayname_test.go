package kernelid

import (
	"testing"
)

func TestReplayEntryNameRoundTrip(t *testing.T) {
	for _, name := range []string{
		"void at::vectorized_elementwise_kernel",
		"void at::(anonymous namespace)::vectorized_layer_norm_kernel",
		"sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize64x64x8_stage3",
		"Conv-void cutlass::Kernel2",
		"", "_", "__x", "\x00\xff",
	} {
		entry := ReplayEntryName(name)
		for i := 0; i < len(entry); i++ {
			if !isIdentByte(entry[i]) {
				t.Fatalf("ReplayEntryName(%q) = %q: byte %q is not a PTX identifier byte", name, entry, entry[i])
			}
		}
		got, ok := ReplayOriginalName(entry)
		if !ok || got != name {
			t.Errorf("ReplayOriginalName(ReplayEntryName(%q)) = %q, %v", name, got, ok)
		}
	}
	if got := ReplayEntryName("void at::k_1"); got != "fkr_void_20at_3a_3ak__1" {
		t.Errorf("ReplayEntryName = %q", got)
	}
}

func TestReplayOriginalNameRejects(t *testing.T) {
	for _, entry := range []string{"", "Conv", "fkr_a_", "fkr_a_4", "fkr_a_zz", "fkr_a_41", "fkr_a-b"} {
		if got, ok := ReplayOriginalName(entry); ok {
			t.Errorf("ReplayOriginalName(%q) = %q, true; want false", entry, got)
		}
	}
}

func FuzzReplayOriginalName(f *testing.F) {
	f.Add("fkr_void_20at_3a_3ak__1")
	f.Add("fkr_")
	f.Fuzz(func(t *testing.T, entry string) {
		name, ok := ReplayOriginalName(entry)
		if ok && ReplayEntryName(name) != entry {
			t.Fatalf("%q decodes to %q which encodes to %q", entry, name, ReplayEntryName(name))
		}
	})
}
