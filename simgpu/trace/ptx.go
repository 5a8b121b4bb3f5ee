package trace

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/fikit/fikit/kernelid"
)

// PTXParam is the name of every replay entry's one parameter: a .u64 duration
// in nanoseconds. simgpu runs a kernel whose first parameter is a .u64 named
// "…_ns" for exactly that long (its spin-kernel convention), and on a real GPU
// the entry spins on %globaltimer for that long.
const PTXParam = "duration_ns"

// PTX header: PTX ISA 7.0 for sm_70 is JIT-compiled by every driver since
// CUDA 11.0 for every GPU since Volta.
const ptxHeader = `//
// fikit-replay spin kernels: one entry per distinct trace kernel name.
// Entry names come from kernelid.ReplayEntryName; kernelid.ReplayOriginalName
// recovers the trace name. Each entry takes one .u64 parameter, its duration
// in ns: thread (0,0,0) of block (0,0,0) spins on %globaltimer that long, every
// other thread returns at once, so the kernel lasts its duration at any size.
//
.version 7.0
.target sm_70
.address_size 64
`

// ptxBody follows ".visible .entry NAME(" for every entry.
const ptxBody = `
	.param .u64 ` + PTXParam + `
)
{
	.reg .pred 	%p<3>;
	.reg .b32 	%r<8>;
	.reg .b64 	%rd<5>;

	mov.u32 	%r1, %tid.x;
	mov.u32 	%r2, %tid.y;
	or.b32  	%r7, %r1, %r2;
	mov.u32 	%r3, %tid.z;
	or.b32  	%r7, %r7, %r3;
	mov.u32 	%r4, %ctaid.x;
	or.b32  	%r7, %r7, %r4;
	mov.u32 	%r5, %ctaid.y;
	or.b32  	%r7, %r7, %r5;
	mov.u32 	%r6, %ctaid.z;
	or.b32  	%r7, %r7, %r6;
	setp.ne.s32 	%p1, %r7, 0;
	@%p1 bra 	$L__done;
	ld.param.u64 	%rd1, [` + PTXParam + `];
	mov.u64 	%rd2, %globaltimer;
	add.s64 	%rd3, %rd2, %rd1;
$L__spin:
	mov.u64 	%rd4, %globaltimer;
	setp.lt.u64 	%p2, %rd4, %rd3;
	@%p2 bra 	$L__spin;
$L__done:
	ret;
}
`

// PTX returns one PTX module with a spin-kernel entry per distinct kernel
// name of t, in order of first launch, and the map from entry name to trace
// name.
func PTX(t *Trace) (string, map[string]string) {
	return PTXForNames(t.Names())
}

// PTXForNames is PTX for a list of kernel names (duplicates are skipped).
func PTXForNames(names []string) (string, map[string]string) {
	entries := make(map[string]string, len(names))
	var b strings.Builder
	b.WriteString(ptxHeader)
	for _, name := range names {
		entry := kernelid.ReplayEntryName(name)
		if _, dup := entries[entry]; dup {
			continue
		}
		entries[entry] = name
		fmt.Fprintf(&b, "\n// %s\n.visible .entry %s(%s", strconv.QuoteToASCII(name), entry, ptxBody)
	}
	return b.String(), entries
}
