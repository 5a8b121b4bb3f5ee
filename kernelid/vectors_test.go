package kernelid

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

var rewrite = flag.Bool("rewrite", false, "rewrite testdata/*.tsv from the vector lists in vectors_test.go")

const (
	kernelIDsFile = "testdata/kernel_ids.tsv"
	taskKeysFile  = "testdata/task_keys.tsv"
)

type kernelIDCase struct {
	name        string
	grid, block [3]uint32
}

func dims(gx, gy, gz, bx, by, bz uint32) [6]uint32 {
	return [6]uint32{gx, gy, gz, bx, by, bz}
}

// kernelIDCases lists the inputs of testdata/kernel_ids.tsv.
func kernelIDCases() []kernelIDCase {
	const max = 0xffffffff
	var cases []kernelIDCase
	add := func(name string, d [6]uint32) {
		cases = append(cases, kernelIDCase{name, [3]uint32{d[0], d[1], d[2]}, [3]uint32{d[3], d[4], d[5]}})
	}
	add("", dims(0, 0, 0, 0, 0, 0))
	add("", dims(max, max, max, max, max, max))
	add("a", dims(1, 1, 1, 1, 1, 1))
	add("_Z10add_kernelPfPKfS1_i", dims(256, 1, 1, 256, 1, 1))
	add("_Z10add_kernelPfPKfS1_i", dims(1, 256, 1, 256, 1, 1))
	add("_Z10add_kernelPfPKfS1_i", dims(256, 1, 1, 1, 256, 1))
	add("_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIfEESt5arrayIPcLm1EEEEviT0_T1_", dims(1024, 1, 1, 128, 1, 1))
	add("_ZN4vllm25paged_attention_v1_kernelIttLi128ELi16ELi128ELNS_18Fp8KVCacheDataTypeE0ELb0EEEvPT_PKS2_PKT0_S8_ifPKiSA_iPKfiiiff", dims(32, 16, 1, 128, 1, 1))
	add("sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize64x64x8_stage3_warpsize2x2x1_ffma_aligna4_alignc4_execute_kernel__5x_cublas", dims(8, 16, 1, 128, 1, 1))
	add("void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<float, float>", dims(4096, 1, 1, 32, 4, 1))
	add(ReplayEntryName("void at::native::vectorized_elementwise_kernel"), dims(2, 1, 1, 64, 1, 1))
	add("kernel", dims(0, 0, 0, 1, 1, 1))
	add("kernel", dims(1, 1, 1, 0, 0, 0))
	add("kernel", dims(127, 128, 255, 256, 65535, 65536))
	add("kernel", dims(2147483647, 2147483648, max, 1024, 1024, 64))
	add("kernel", dims(0x01020304, 0x05060708, 0x090a0b0c, 0x0d0e0f10, 0x11121314, 0x15161718))
	add("tab\there", dims(1, 1, 1, 1, 1, 1))
	add("new\nline", dims(1, 1, 1, 1, 1, 1))
	add(`back\slash \x41`, dims(1, 1, 1, 1, 1, 1))
	add("\x01\x1f\x7f\x80\xfe\xff", dims(1, 1, 1, 1, 1, 1))
	add("ядро_κ_核", dims(3, 2, 1, 96, 1, 1))
	add(" leading and trailing spaces ", dims(1, 1, 1, 1, 1, 1))
	add(`quote"s and #hash`, dims(1, 1, 1, 1, 1, 1))
	// A long template-heavy name, as CUTLASS and flash-attention produce.
	long := "_ZN7cutlass6KernelINS_4gemm6kernel13GemmUniversal" +
		strings.Repeat("INS_6layout8RowMajorENS_10bfloat16_tELi8ENS_4arch14OpMultiplyAddE", 12) + "EEEEvNT_6ParamsE"
	add(long, dims(132, 1, 1, 384, 1, 1))
	add(strings.Repeat("_ZN5flash", 500)+"E", dims(1, 1, 1, 1, 1, 1))
	ids := []uint64{ID("_Z10add_kernelPfPKfS1_i", [3]uint32{256, 1, 1}, [3]uint32{256, 1, 1}), ID("kernel", [3]uint32{1, 1, 1}, [3]uint32{}), 0, ^uint64(0)}
	add(GraphName(nil), dims(0, 0, 0, 0, 0, 0))
	add(GraphName(ids[:1]), dims(0, 0, 0, 0, 0, 0))
	add(GraphName(ids), dims(0, 0, 0, 0, 0, 0))
	return cases
}

type taskKeyCase struct{ argv []string }

// taskKeyCases lists the inputs of testdata/task_keys.tsv.
func taskKeyCases() []taskKeyCase {
	var cases []taskKeyCase
	add := func(argv ...string) { cases = append(cases, taskKeyCase{argv}) }
	add("python3")
	add("/usr/bin/python3", "serve.py", "--port", "8000")
	add("./run.sh")
	add("relative/dir/tool", "x")
	add("/usr/bin/")
	add("/usr/bin/", "x")
	add("")
	add("", "arg")
	add("python3", "-c", "print('a b')")
	add("python3", "a b", "c")
	add("python3", "", "x")
	add("python3", "")
	add("python3", "/abs/path/model.py")
	add("sh", "-c", "echo a\tb\nc")
	add(`C:\weird\name`, `back\slash`)
	add("/opt/модель/сервис", "--имя=значение", "日本語")
	add("bin", "\x01\x7f\x80\xff")
	// Around the 200-byte limit.
	add(strings.Repeat("a", 200))
	add(strings.Repeat("a", 201))
	add("/usr/bin/python3", strings.Repeat("b", 199-len("python3")))
	add("/usr/bin/python3", strings.Repeat("b", 200-len("python3")))
	add("python3", strings.Repeat("c", 500))
	// A multi-byte character across the 183-byte cut.
	add(strings.Repeat("u", 182) + "é" + strings.Repeat("u", 30))
	// Many arguments with spaces, unicode and empty ones.
	args := []string{"/srv/bin/triton-server"}
	for i := range 40 {
		args = append(args, fmt.Sprintf("--model-%d=ř ž", i), "")
	}
	add(args...)
	return cases
}

// tsvFields splits a vector line at tabs and unescapes every field.
func tsvFields(line string) ([]string, error) {
	parts := strings.Split(line, "\t")
	for i, p := range parts {
		s, err := Unescape(p)
		if err != nil {
			return nil, fmt.Errorf("field %d: %w", i, err)
		}
		parts[i] = s
	}
	return parts, nil
}

// vectorLines returns the non-comment lines of a vector file with their line
// numbers.
func vectorLines(t *testing.T, path string) (lines []string, numbers []int) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for n := 1; sc.Scan(); n++ {
		if strings.HasPrefix(sc.Text(), "#") {
			continue
		}
		lines = append(lines, sc.Text())
		numbers = append(numbers, n)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return lines, numbers
}

func writeVectors(t *testing.T, path, header string, lines []string) {
	t.Helper()
	var b strings.Builder
	b.WriteString(header)
	for _, l := range lines {
		b.WriteString(l)
		b.WriteByte('\n')
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

func kernelIDLine(c kernelIDCase) string {
	return fmt.Sprintf("%s\t%d %d %d %d %d %d\t%s", FormatID(ID(c.name, c.grid, c.block)),
		c.grid[0], c.grid[1], c.grid[2], c.block[0], c.block[1], c.block[2], Escape(c.name))
}

func taskKeyLine(c taskKeyCase) string {
	fields := []string{Escape(TaskKey(c.argv))}
	for _, a := range c.argv {
		fields = append(fields, Escape(a))
	}
	return strings.Join(fields, "\t")
}

const kernelIDsHeader = `# fikit kernel ID vectors (docs/design.md "Kernel ID"); read by the Go and C tests.
# <id as 16 hex digits>\t<grid x> <grid y> <grid z> <block x> <block y> <block z>\t<name>
# Names use the escapes \\ \t \n \xHH (every byte outside printable ASCII); an empty name leaves
# the last field empty. Generated by: go test ./kernelid -run TestVectors -rewrite
`

const taskKeysHeader = `# fikit task key vectors (docs/design.md "Task key"); read by the Go and C tests.
# <key>\t<argv element 0>\t<argv element 1>... (every line has at least one argv element, which
# may be empty). Fields use the escapes \\ \t \n \xHH (every byte outside printable ASCII).
# Generated by: go test ./kernelid -run TestVectors -rewrite
`

// writeSeedCorpus writes one seed per entry in the go test fuzz v1 format.
func writeSeedCorpus(t *testing.T, fuzzName string, seeds []string) {
	t.Helper()
	dir := filepath.Join("testdata", "fuzz", fuzzName)
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for i, s := range seeds {
		data := "go test fuzz v1\nstring(" + strconv.Quote(s) + ")\n"
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("seed_%03d", i)), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// writeSeedCorpora writes testdata/fuzz/ from the vectors: every escaped
// field for FuzzUnescape, every name for FuzzDisplayName and
// FuzzGraphKernelIDs, their replayer entry names for FuzzReplayOriginalName.
func writeSeedCorpora(t *testing.T, kcases []kernelIDCase, tcases []taskKeyCase) {
	var escaped, names, entries []string
	for _, c := range kcases {
		escaped = append(escaped, Escape(c.name))
		names = append(names, c.name)
		entries = append(entries, ReplayEntryName(c.name))
	}
	for _, c := range tcases {
		escaped = append(escaped, Escape(TaskKey(c.argv)))
		for _, a := range c.argv {
			escaped = append(escaped, Escape(a))
		}
	}
	escaped = append(escaped, `\`, `\x`, `\x4`, `\xZZ`, `\q`, `\xAB`)
	writeSeedCorpus(t, "FuzzUnescape", escaped)
	writeSeedCorpus(t, "FuzzDisplayName", names)
	writeSeedCorpus(t, "FuzzGraphKernelIDs", names)
	writeSeedCorpus(t, "FuzzReplayOriginalName", entries)
}

func TestVectors(t *testing.T) {
	kcases, tcases := kernelIDCases(), taskKeyCases()
	if *rewrite {
		var kl, tl []string
		for _, c := range kcases {
			kl = append(kl, kernelIDLine(c))
		}
		for _, c := range tcases {
			tl = append(tl, taskKeyLine(c))
		}
		writeVectors(t, kernelIDsFile, kernelIDsHeader, kl)
		writeVectors(t, taskKeysFile, taskKeysHeader, tl)
		writeSeedCorpora(t, kcases, tcases)
	}

	t.Run("kernel_ids", func(t *testing.T) {
		lines, numbers := vectorLines(t, kernelIDsFile)
		if len(lines) != len(kcases) {
			t.Errorf("%s has %d vectors, vectors_test.go lists %d (run with -rewrite?)", kernelIDsFile, len(lines), len(kcases))
		}
		for i, line := range lines {
			f, err := tsvFields(line)
			if err != nil || len(f) != 3 {
				t.Errorf("line %d: want 3 fields: %q (%v)", numbers[i], line, err)
				continue
			}
			want, err := strconv.ParseUint(f[0], 16, 64)
			if err != nil || len(f[0]) != 16 {
				t.Errorf("line %d: bad id %q", numbers[i], f[0])
				continue
			}
			var d [6]uint32
			ds := strings.Split(f[1], " ")
			if len(ds) != 6 {
				t.Errorf("line %d: want 6 dimensions, got %q", numbers[i], f[1])
				continue
			}
			for j, s := range ds {
				v, err := strconv.ParseUint(s, 10, 32)
				if err != nil {
					t.Errorf("line %d: dimension %q: %v", numbers[i], s, err)
				}
				d[j] = uint32(v)
			}
			grid, block := [3]uint32{d[0], d[1], d[2]}, [3]uint32{d[3], d[4], d[5]}
			if got := ID(f[2], grid, block); got != want {
				t.Errorf("line %d: ID(%q, %v, %v) = %016x, file says %016x", numbers[i], f[2], grid, block, got, want)
			}
			if got := referenceID(f[2], grid, block); got != want {
				t.Errorf("line %d: reference ID = %016x, file says %016x", numbers[i], got, want)
			}
			if i < len(kcases) && kernelIDLine(kcases[i]) != line {
				t.Errorf("line %d: differs from vectors_test.go case %d (run with -rewrite?)", numbers[i], i)
			}
		}
	})

	t.Run("task_keys", func(t *testing.T) {
		lines, numbers := vectorLines(t, taskKeysFile)
		if len(lines) != len(tcases) {
			t.Errorf("%s has %d vectors, vectors_test.go lists %d (run with -rewrite?)", taskKeysFile, len(lines), len(tcases))
		}
		for i, line := range lines {
			f, err := tsvFields(line)
			if err != nil || len(f) < 2 {
				t.Errorf("line %d: want at least 2 fields: %q (%v)", numbers[i], line, err)
				continue
			}
			if got := TaskKey(f[1:]); got != f[0] {
				t.Errorf("line %d: TaskKey(%q) = %q, file says %q", numbers[i], f[1:], got, f[0])
			}
			if len(f[0]) > MaxTaskKeyLen {
				t.Errorf("line %d: key of %d bytes", numbers[i], len(f[0]))
			}
			if i < len(tcases) && taskKeyLine(tcases[i]) != line {
				t.Errorf("line %d: differs from vectors_test.go case %d (run with -rewrite?)", numbers[i], i)
			}
		}
	})
}
