package trace

import (
	"bytes"
	"errors"
	"io"
	"os"
	"testing"
)

// checkDecoded is what every successful or failed read must satisfy: a
// *ParseError naming the file on failure; on success a valid trace that
// survives a round trip through the fikit format unchanged.
func checkDecoded(t *testing.T, tr *Trace, err error) {
	t.Helper()
	if err != nil {
		var pe *ParseError
		if !errors.As(err, &pe) || pe.File != "fuzz.csv" {
			t.Fatalf("error %v (%T) is not a *ParseError for fuzz.csv", err, err)
		}
		return
	}
	if err := tr.Validate(); err != nil {
		t.Fatalf("decoded trace invalid: %v", err)
	}
	var buf bytes.Buffer
	if err := Write(&buf, tr); err != nil {
		t.Fatalf("Write: %v", err)
	}
	back, err := Read(&buf, "back.csv")
	if err != nil {
		t.Fatalf("read back: %v", err)
	}
	if !sameKernels(back, tr) {
		t.Fatalf("round trip changed the trace:\n%+v\n%+v", tr.Kernels, back.Kernels)
	}
}

func FuzzReadOrion(f *testing.F) {
	f.Add([]byte("Name,Profile,Memory_footprint,SM_usage,Duration\nConv,1,0,98,100480\n"))
	f.Add([]byte("Name,Profile,Memory_footprint,SM_usage,Duration,Block,Grid\nBatchNorm,0,0,64,19584,512,256\nk,0,0,0,1,0,0\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		tr, err := ReadOrion(bytes.NewReader(data), "fuzz.csv")
		checkDecoded(t, tr, err)
	})
}

func FuzzReadFikit(f *testing.F) {
	f.Add([]byte("# fikit-trace v1\nname,duration_ns,host_ns,grid,block\nConv,1000,500,8x2,32x4x2\n"))
	f.Add([]byte("# fikit-trace v1\n# c\nname,duration_ns\n\"a,b\",20\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		tr, err := ReadFikit(bytes.NewReader(data), "fuzz.csv")
		checkDecoded(t, tr, err)
	})
}

// FuzzRead also feeds the reader one byte at a time, which must not change
// the result.
func FuzzRead(f *testing.F) {
	f.Add([]byte("\xEF\xBB\xBF# fikit-trace v1\r\nname,duration_ns\r\nk,1\r\n"))
	f.Add([]byte("Name,Duration\r\nk,1\r\n\r\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		tr, err := Read(bytes.NewReader(data), "fuzz.csv")
		checkDecoded(t, tr, err)
		tr2, err2 := Read(&oneByteReader{data}, "fuzz.csv")
		if (err == nil) != (err2 == nil) || err != nil && err.Error() != err2.Error() || err == nil && !sameKernels(tr, tr2) {
			t.Fatalf("byte-at-a-time read differs: %v vs %v", err, err2)
		}
	})
}

type oneByteReader struct{ b []byte }

func (r *oneByteReader) Read(p []byte) (int, error) {
	if len(r.b) == 0 {
		return 0, io.EOF
	}
	if len(p) == 0 {
		return 0, nil
	}
	p[0], r.b = r.b[0], r.b[1:]
	return 1, nil
}

// FuzzReadTorchProfile: a torch.profiler trace either gives runs whose
// typical one is a valid trace surviving the fikit format, or a
// *ParseError.
func FuzzReadTorchProfile(f *testing.F) {
	for _, file := range []string{"testdata/torch/eager.json", "testdata/torch/graph.json"} {
		if b, err := os.ReadFile(file); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte(`{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "ts": 1.0005, "dur": 2}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := ReadTorchProfile(bytes.NewReader(data), "fuzz.csv")
		if err != nil {
			checkDecoded(t, nil, err)
			return
		}
		tr, _, err := p.Trace(-1)
		if err != nil {
			t.Fatalf("a read profile's typical run is not a trace: %v", err)
		}
		checkDecoded(t, tr, nil)
	})
}
