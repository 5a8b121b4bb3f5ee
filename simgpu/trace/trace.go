package trace

import (
	"fmt"
)

// Limits every trace obeys; the readers reject input beyond them.
const (
	// MaxKernels bounds the launches of one trace.
	MaxKernels = 1 << 20
	// MaxNameLen bounds a kernel name in bytes.
	MaxNameLen = 4096
	// MaxDurationNs bounds one kernel's duration and one host-time gap (1 minute).
	MaxDurationNs = 60_000_000_000
	// MaxGridX, MaxGridYZ, MaxBlockXY, MaxBlockZ and MaxBlockThreads are
	// CUDA's launch limits (compute capability ≥ 3.0).
	MaxGridX        = 1<<31 - 1
	MaxGridYZ       = 65535
	MaxBlockXY      = 1024
	MaxBlockZ       = 64
	MaxBlockThreads = 1024
)

// DefaultBlockX is the block size used when a trace records none.
const DefaultBlockX = 256

// Profile is Orion's classification of a kernel.
type Profile int8

// Profile values as Orion writes them.
const (
	ProfileUnknown Profile = -1
	ProfileMemory  Profile = 0
	ProfileCompute Profile = 1
)

func (p Profile) String() string {
	switch p {
	case ProfileUnknown:
		return "unknown"
	case ProfileMemory:
		return "memory"
	case ProfileCompute:
		return "compute"
	}
	return fmt.Sprintf("Profile(%d)", int8(p))
}

// Format names a trace file format.
type Format uint8

// The formats the package reads.
const (
	FormatOrion Format = iota + 1 // Orion's kernel CSV
	FormatFikit                   // "# fikit-trace v1"
)

func (f Format) String() string {
	switch f {
	case FormatOrion:
		return "orion"
	case FormatFikit:
		return "fikit-v1"
	}
	return fmt.Sprintf("Format(%d)", uint8(f))
}

// Kernel is one launch of a trace.
type Kernel struct {
	Name            string    // kernel or op name as recorded
	DurationNs      int64     // GPU time of the kernel
	Grid            [3]uint32 // grid dimensions (x, y, z), each ≥ 1
	Block           [3]uint32 // block dimensions (x, y, z), each ≥ 1
	SMUsage         uint32    // Orion's SM_usage (thread blocks / SMs needed), 0 if unknown
	Profile         Profile   // Orion's profile class
	MemoryFootprint int64     // Orion's Memory_footprint, 0 if unknown
	HostNs          int64     // busy host time before this launch; valid when Trace.HasHostTime
}

// Trace is the ordered kernel launches of one run.
type Trace struct {
	Source      string // file path or embedded name it was read from, for messages
	Format      Format
	HasHostTime bool // the trace carries each kernel's HostNs
	Kernels     []Kernel
}

// DerivedGrid is the grid used for a kernel whose trace records none.
func DerivedGrid(smUsage uint32) [3]uint32 {
	return [3]uint32{max(1, min(smUsage, MaxGridX)), 1, 1}
}

// DerivedBlock is the block used for a kernel whose trace records none.
func DerivedBlock() [3]uint32 { return [3]uint32{DefaultBlockX, 1, 1} }

// Names returns the distinct kernel names in order of first launch.
func (t *Trace) Names() []string {
	seen := make(map[string]bool)
	var names []string
	for _, k := range t.Kernels {
		if !seen[k.Name] {
			seen[k.Name] = true
			names = append(names, k.Name)
		}
	}
	return names
}

// GPUTimeNs is the sum of all kernel durations.
func (t *Trace) GPUTimeNs() int64 {
	var s int64
	for _, k := range t.Kernels {
		s += k.DurationNs
	}
	return s
}

// HostTimesNs returns the busy host time before each launch: cpuNs for every
// kernel when cpuNs ≥ 0, else the trace's own host times (zero when it has none).
func (t *Trace) HostTimesNs(cpuNs int64) []int64 {
	h := make([]int64, len(t.Kernels))
	for i, k := range t.Kernels {
		switch {
		case cpuNs >= 0:
			h[i] = cpuNs
		case t.HasHostTime:
			h[i] = k.HostNs
		}
	}
	return h
}

// Validate checks every limit of the package; the readers only return traces
// that pass it, Write refuses traces that do not.
func (t *Trace) Validate() error {
	if len(t.Kernels) == 0 {
		return fmt.Errorf("%w: %w", ErrInvalid, ErrEmpty)
	}
	if len(t.Kernels) > MaxKernels {
		return fmt.Errorf("%w: %d kernels, at most %d", ErrInvalid, len(t.Kernels), MaxKernels)
	}
	for i := range t.Kernels {
		if err := t.Kernels[i].validate(); err != nil {
			return fmt.Errorf("%w: kernel %d: %w", ErrInvalid, i, err)
		}
		if !t.HasHostTime && t.Kernels[i].HostNs != 0 {
			return fmt.Errorf("%w: kernel %d: host time set but trace has none", ErrInvalid, i)
		}
	}
	return nil
}

func (k *Kernel) validate() error {
	if err := checkName(k.Name); err != nil {
		return err
	}
	if k.DurationNs < 0 || k.DurationNs > MaxDurationNs {
		return fmt.Errorf("duration %d ns out of range [0, %d]", k.DurationNs, int64(MaxDurationNs))
	}
	if k.HostNs < 0 || k.HostNs > MaxDurationNs {
		return fmt.Errorf("host time %d ns out of range [0, %d]", k.HostNs, int64(MaxDurationNs))
	}
	if err := checkGrid(k.Grid); err != nil {
		return err
	}
	if err := checkBlock(k.Block); err != nil {
		return err
	}
	if k.Profile < ProfileUnknown || k.Profile > ProfileCompute {
		return fmt.Errorf("profile %d not in -1..1", k.Profile)
	}
	if k.MemoryFootprint < 0 {
		return fmt.Errorf("negative memory footprint %d", k.MemoryFootprint)
	}
	return nil
}

func checkName(name string) error {
	if name == "" {
		return fmt.Errorf("empty kernel name")
	}
	if len(name) > MaxNameLen {
		return fmt.Errorf("kernel name of %d bytes, at most %d", len(name), MaxNameLen)
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; c < 0x20 || c == 0x7f {
			return fmt.Errorf("control character 0x%02x at byte %d of kernel name", c, i)
		}
	}
	return nil
}

func checkGrid(g [3]uint32) error {
	if g[0] < 1 || g[0] > MaxGridX || g[1] < 1 || g[1] > MaxGridYZ || g[2] < 1 || g[2] > MaxGridYZ {
		return fmt.Errorf("grid %s outside CUDA's limits (%dx%dx%d)", dimString(g), MaxGridX, MaxGridYZ, MaxGridYZ)
	}
	return nil
}

func checkBlock(b [3]uint32) error {
	if b[0] < 1 || b[0] > MaxBlockXY || b[1] < 1 || b[1] > MaxBlockXY || b[2] < 1 || b[2] > MaxBlockZ {
		return fmt.Errorf("block %s outside CUDA's limits (%dx%dx%d)", dimString(b), MaxBlockXY, MaxBlockXY, MaxBlockZ)
	}
	if uint64(b[0])*uint64(b[1])*uint64(b[2]) > MaxBlockThreads {
		return fmt.Errorf("block %s has more than %d threads", dimString(b), MaxBlockThreads)
	}
	return nil
}

// dimString writes a dimension triple as fikit traces do: "XxYxZ".
func dimString(d [3]uint32) string {
	return fmt.Sprintf("%dx%dx%d", d[0], d[1], d[2])
}
