package launchprobe

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/rlimit"
)

// Errors returned by this package, wrapped with context.
var (
	// ErrUnsupported: uprobes cannot be attached here (no privilege, no kernel support).
	ErrUnsupported = errors.New("launch probes unsupported")
	// ErrNoLaunchSymbols: the library exports none of the launch entry points.
	ErrNoLaunchSymbols = errors.New("no launch entry points in library")
	// ErrNoLibrary: no libcuda.so.1 was found to probe.
	ErrNoLibrary = errors.New("no libcuda.so.1 found")
)

// LaunchSymbols are the driver entry points that launch one kernel; the hook intercepts each.
var LaunchSymbols = []string{
	"cuLaunchKernel",
	"cuLaunchKernel_ptsz",
	"cuLaunchKernelEx",
	"cuLaunchKernelEx_ptsz",
	"cuLaunchCooperativeKernel",
	"cuLaunchCooperativeKernel_ptsz",
}

// Count is the number of calls one process made to one entry point.
type Count struct {
	PID    uint32 `json:"pid"`
	Comm   string `json:"comm"`
	Symbol string `json:"symbol"`
	Calls  uint64 `json:"calls"`
}

// Probe is a live set of uprobes on one library; Close detaches them.
type Probe struct {
	lib     string
	symbols []string // index = the key's symbol field
	counts  *ebpf.Map
	progs   []*ebpf.Program
	links   []link.Link
}

// map layout, shared by the program and the reader.
const (
	keySize   = 8  // u32 tgid, u32 symbol index
	valueSize = 24 // u64 calls, char comm[16]
	commLen   = 16
)

// Open attaches a counting uprobe to every launch entry point that lib exports.
func Open(lib string) (*Probe, error) {
	if lib == "" {
		var err error
		if lib, err = FindLibcuda(); err != nil {
			return nil, err
		}
	}
	if err := rlimit.RemoveMemlock(); err != nil {
		return nil, fmt.Errorf("%w: memlock: %w", ErrUnsupported, err)
	}
	ex, err := link.OpenExecutable(lib)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", lib, err)
	}
	p := &Probe{lib: lib}
	p.counts, err = ebpf.NewMap(&ebpf.MapSpec{
		Name:       "fikit_launches",
		Type:       ebpf.Hash,
		KeySize:    keySize,
		ValueSize:  valueSize,
		MaxEntries: 16384,
	})
	if err != nil {
		return nil, fmt.Errorf("%w: create map: %w", ErrUnsupported, err)
	}
	for _, sym := range LaunchSymbols {
		prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
			Name:         "fikit_launch",
			Type:         ebpf.Kprobe, // uprobes use the kprobe program type
			License:      "GPL",
			Instructions: countProgram(p.counts.FD(), int64(len(p.symbols))),
		})
		if err != nil {
			p.Close()
			return nil, fmt.Errorf("%w: load program: %w", ErrUnsupported, err)
		}
		l, err := ex.Uprobe(sym, prog, nil)
		if errors.Is(err, link.ErrNoSymbol) {
			prog.Close()
			continue
		}
		if err != nil {
			prog.Close()
			p.Close()
			return nil, fmt.Errorf("%w: attach %s: %w", ErrUnsupported, sym, err)
		}
		p.progs = append(p.progs, prog)
		p.links = append(p.links, l)
		p.symbols = append(p.symbols, sym)
	}
	if len(p.symbols) == 0 {
		p.Close()
		return nil, fmt.Errorf("%s: %w", lib, ErrNoLaunchSymbols)
	}
	return p, nil
}

// HookThread is the name of the hook's sender thread (hookclient/
// sender.c), the only thread that launches the hook's own kernel (its probe,
// hookclient/probe.c): launches from it are not the service's and are not
// counted.
const HookThread = "fikit-sender"

// countProgram is, in C:
//
//	if (current thread's comm == HookThread) return 0
//	key = {tgid, symbol}; v = lookup(&key)
//	if (!v) { new = {1, comm}; if (!update(&key, &new, BPF_NOEXIST)) return 0; v = lookup(&key) }
//	if (v) atomic v->calls += 1
//
// The second lookup covers two threads of one process racing to create the entry.
func countProgram(mapFD int, symbol int64) asm.Instructions {
	const key, value = -8, -8 - valueSize
	const comm = value - commLen // the current thread's name, to compare
	var name [commLen]byte
	copy(name[:], HookThread)
	lookup := func() asm.Instructions {
		return asm.Instructions{
			asm.LoadMapPtr(asm.R1, mapFD),
			asm.Mov.Reg(asm.R2, asm.RFP),
			asm.Add.Imm(asm.R2, key),
			asm.FnMapLookupElem.Call(),
		}
	}
	insns := asm.Instructions{
		asm.Mov.Reg(asm.R1, asm.RFP),
		asm.Add.Imm(asm.R1, comm),
		asm.Mov.Imm(asm.R2, commLen),
		asm.FnGetCurrentComm.Call(),
		asm.LoadMem(asm.R1, asm.RFP, comm, asm.DWord),
		asm.LoadImm(asm.R2, int64(binary.NativeEndian.Uint64(name[:8])), asm.DWord),
		asm.JNE.Reg(asm.R1, asm.R2, "count"),
		asm.LoadMem(asm.R1, asm.RFP, comm+8, asm.DWord),
		asm.LoadImm(asm.R2, int64(binary.NativeEndian.Uint64(name[8:])), asm.DWord),
		asm.JNE.Reg(asm.R1, asm.R2, "count"),
		asm.Mov.Imm(asm.R0, 0),
		asm.Return(),
		asm.FnGetCurrentPidTgid.Call().WithSymbol("count"),
		asm.RSh.Imm(asm.R0, 32),
		asm.StoreMem(asm.RFP, key, asm.R0, asm.Word),
		asm.StoreImm(asm.RFP, key+4, symbol, asm.Word),
	}
	insns = append(insns, lookup()...)
	insns = append(insns,
		asm.JNE.Imm(asm.R0, 0, "add"),
		asm.Mov.Imm(asm.R1, 1),
		asm.StoreMem(asm.RFP, value, asm.R1, asm.DWord),
		asm.Mov.Reg(asm.R1, asm.RFP),
		asm.Add.Imm(asm.R1, value+8),
		asm.Mov.Imm(asm.R2, commLen),
		asm.FnGetCurrentComm.Call(),
		asm.LoadMapPtr(asm.R1, mapFD),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, key),
		asm.Mov.Reg(asm.R3, asm.RFP),
		asm.Add.Imm(asm.R3, value),
		asm.Mov.Imm(asm.R4, int32(ebpf.UpdateNoExist)),
		asm.FnMapUpdateElem.Call(),
		asm.JEq.Imm(asm.R0, 0, "out"),
	)
	insns = append(insns, lookup()...)
	insns = append(insns,
		asm.JEq.Imm(asm.R0, 0, "out"),
		asm.Mov.Imm(asm.R1, 1).WithSymbol("add"),
		asm.StoreXAdd(asm.R0, asm.R1, asm.DWord),
		asm.Mov.Imm(asm.R0, 0).WithSymbol("out"),
		asm.Return(),
	)
	return insns
}

// Library is the probed file; Symbols the entry points it exports and that are probed.
func (p *Probe) Library() string   { return p.lib }
func (p *Probe) Symbols() []string { return append([]string(nil), p.symbols...) }

// Counts reads every counter, ordered by process then entry point.
func (p *Probe) Counts() ([]Count, error) {
	var (
		key   [keySize]byte
		value [valueSize]byte
		out   []Count
	)
	it := p.counts.Iterate()
	for it.Next(&key, &value) {
		sym := int(binary.NativeEndian.Uint32(key[4:]))
		if sym >= len(p.symbols) {
			continue
		}
		comm := value[8:]
		if i := bytes.IndexByte(comm, 0); i >= 0 {
			comm = comm[:i]
		}
		out = append(out, Count{
			PID:    binary.NativeEndian.Uint32(key[:4]),
			Comm:   string(comm),
			Symbol: p.symbols[sym],
			Calls:  binary.NativeEndian.Uint64(value[:8]),
		})
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("read counters: %w", err)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].PID != out[j].PID {
			return out[i].PID < out[j].PID
		}
		return out[i].Symbol < out[j].Symbol
	})
	return out, nil
}

// Close detaches the probes and frees the map.
func (p *Probe) Close() error {
	var errs []error
	for _, l := range p.links {
		errs = append(errs, l.Close())
	}
	for _, prog := range p.progs {
		errs = append(errs, prog.Close())
	}
	if p.counts != nil {
		errs = append(errs, p.counts.Close())
	}
	p.links, p.progs, p.counts = nil, nil, nil
	return errors.Join(errs...)
}

// FindLibcuda looks for libcuda.so.1 where the dynamic loader would: LD_LIBRARY_PATH, then the
// usual system directories.
func FindLibcuda() (string, error) {
	var dirs []string
	for _, d := range strings.Split(os.Getenv("LD_LIBRARY_PATH"), ":") {
		if d != "" {
			dirs = append(dirs, d)
		}
	}
	dirs = append(dirs, "/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib", "/lib/x86_64-linux-gnu",
		"/usr/local/cuda/lib64", "/usr/lib/wsl/lib")
	for _, d := range dirs {
		path := filepath.Join(d, "libcuda.so.1")
		if st, err := os.Stat(path); err == nil && st.Mode().IsRegular() {
			return path, nil
		}
	}
	return "", fmt.Errorf("%w (searched LD_LIBRARY_PATH and %s; pass the library's path)", ErrNoLibrary,
		strings.Join(dirs[len(dirs)-6:], ", "))
}
