package kernelid

import (
	"strings"
	"testing"
)

func TestDisplayName(t *testing.T) {
	for _, v := range []struct{ in, want string }{
		{"_Z10add_kernelPfPKfS1_i", "add_kernel"},
		{"_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIfEESt5arrayIPcLm1EEEEviT0_T1_",
			"at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, std::array<char*, 1ul> >"},
		{"sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize64x64x8_stage3", "sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize64x64x8_stage3"},
		{"_Znot a mangled name", "_Znot a mangled name"},
		{"", ""},
		{"fikit.graph:000000000000000f", "fikit.graph:000000000000000f"},
		{ReplayEntryName("void at::vectorized_elementwise_kernel"), "void at::vectorized_elementwise_kernel"},
		{ReplayEntryName("_Z10add_kernelPfPKfS1_i"), "add_kernel"},
		{"fkr_not_zz_valid", "fkr_not_zz_valid"},
	} {
		if got := DisplayName(v.in); got != v.want {
			t.Errorf("DisplayName(%q) = %q, want %q", v.in, got, v.want)
		}
	}
}

func FuzzDisplayName(f *testing.F) {
	f.Add("_Z10add_kernelPfPKfS1_i")
	f.Add("_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIfEESt5arrayIPcLm1EEEEviT0_T1_")
	f.Add("fkr_void_20at_3a_3ak__1")
	f.Add("_ZN1aIJEEE")
	f.Fuzz(func(t *testing.T, name string) {
		out := DisplayName(name)
		if !strings.HasPrefix(name, "_Z") && !strings.HasPrefix(name, ReplayPrefix) && out != name {
			t.Fatalf("DisplayName(%q) = %q, want it unchanged", name, out)
		}
		if len(out) > 1<<maxDemangledPow && len(out) > len(name) {
			t.Fatalf("DisplayName(%q) is %d bytes long", name, len(out))
		}
	})
}
