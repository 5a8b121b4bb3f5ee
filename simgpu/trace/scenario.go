package trace

import (
	"bytes"
	"fmt"
	"math"
	"strings"
)

// A ScenarioTrace is one of the frozen traces of the services users run
// today (scenario/README.md): a CUDA-graph and an eager high-priority
// inference, a BERT-base batch 16 and a ResNet-50 training low-priority
// service. No GPU was there to record them, so each is derived from an
// embedded Orion trace by a rule written here and in the trace's header; the
// committed file is that rule's output (TestScenarioTracesFrozen), so the
// derivation stays reproducible and a recording made on a GPU
// (FromTorchProfile, tests/gpu/) can replace it.
type ScenarioTrace struct {
	Name   string // embedded name without "scenario/": graph_resnet50_b1
	Source string // the Orion trace it is derived from
	// Graph: replay it as one CUDA graph launch per request
	// (fikit-replay --graph).
	Graph bool
	// How is the derivation, one comment line per sentence.
	How    []string
	derive func(src *Trace) *Trace
}

// Request times the derivations aim at: the H200's, alone (docs/simgpu.md
// "Presets", "The scenario traces' targets").
const (
	graphResNetDeviceNs = 875_000 // + the h200 preset's launch latency: the measured request
	eagerResNetJCTNs    = 3_100_000
	// LP services: eager PyTorch's host time per op.
	lpHostNs = 10_000
)

// ScenarioTraces lists the frozen scenario traces.
var ScenarioTraces = []ScenarioTrace{
	{
		Name: "graph_resnet50_b1", Source: "h100/resnet50_4_fwd", Graph: true,
		How: []string{
			"ResNet-50 batch 1 served as one CUDA graph per request: the kernel sequence of Orion's H100 ResNet-50",
			"batch-4 forward pass (174 kernels), every duration scaled by the same factor so the graph takes",
			"875 us of device time: with the h200 preset's 5 us launch latency a request takes 0.88 ms alone,",
			"the H200's CUDA-graph ResNet-50 batch 1 (0.87-0.89 ms). No host time between kernels (one launch).",
		},
		derive: func(src *Trace) *Trace { return scaleTo(src, graphResNetDeviceNs, 0) },
	},
	{
		Name: "eager_resnet50_b1", Source: "h100/resnet50_4_fwd",
		How: []string{
			"ResNet-50 batch 1 in eager PyTorch: graph_resnet50_b1's kernels, each launched after the same host",
			"time, chosen so that a request takes 3.1 ms alone, the H200's eager ResNet-50 batch 1 in its fast",
			"regime (its 218 launches took ~14 us each; these 174 take 17.75 us): launch-bound, the kernels",
			"(median 3 us) leave the device idle between launches.",
		},
		derive: func(src *Trace) *Trace {
			host := int64(math.Round(float64(eagerResNetJCTNs)/float64(len(src.Kernels))/50) * 50)
			return scaleTo(src, graphResNetDeviceNs, host)
		},
	},
	{
		Name: "bert_base_b16", Source: "h100/bert_2_fwd",
		How: []string{
			"BERT-base, batch 16, sequence 128 (transformers' BertModel, fp32) from Orion's H100 BERT-large",
			"batch 2, sequence 512 (24 layers, fp32 cuBLAS): the embeddings, the first 12 layers and the pooler;",
			"each kernel's duration scaled by how its work changes: linear layers (hidden 768 instead of",
			"1024, 2048 tokens instead of 1024) x1.125, attention matmuls and score-sized elementwise kernels",
			"(16x12 heads of 128x128 instead of 2x16 of 512x512) x0.375, hidden-sized elementwise kernels",
			"x1.5. Throughput is the H100's as Orion recorded it; an H200 with newer cuBLAS may be faster",
			"(tests/gpu/ records the real one). 10 us of host time per launch (eager PyTorch).",
		},
		derive: bertBase16,
	},
	{
		Name: "train_resnet50_b16", Source: "h100/resnet50_4_fwd",
		How: []string{
			"ResNet-50 training step, batch 16: zero_grad as 4 kernels of 10 us; forward = Orion's H100",
			"batch-4 forward with every duration x4; loss forward and backward (4 small kernels); backward =",
			"the forward kernels in reverse order, each convolution or matmul as two kernels (data and weight",
			"gradient) of its forward duration, every other kernel as one of 1.5x its forward duration; SGD",
			"with momentum over 25.6 M parameters as 8 multi-tensor kernels of 21 us (512 MB moved at 3 TB/s).",
			"The step ends with loss.item(), a synchronisation (the replayer's run end). 10 us of host time per",
			"launch.",
		},
		derive: trainResNet16,
	},
}

// Scenario returns the frozen scenario trace name ("graph_resnet50_b1" or
// "scenario/graph_resnet50_b1") as derived now from its source.
func Scenario(name string) (*ScenarioTrace, error) {
	name = strings.TrimPrefix(name, scenarioPrefix)
	for i := range ScenarioTraces {
		if ScenarioTraces[i].Name == name {
			return &ScenarioTraces[i], nil
		}
	}
	return nil, fmt.Errorf("%w: no scenario trace %q", ErrNotFound, name)
}

// Derive computes the trace from its embedded source.
func (s *ScenarioTrace) Derive() (*Trace, error) {
	src, err := Embedded(s.Source)
	if err != nil {
		return nil, err
	}
	t := s.derive(src)
	t.Source, t.Format = scenarioPrefix+s.Name, FormatFikit
	return t, t.Validate()
}

// Frozen is the text of the frozen file: the fikit format with the
// derivation as comment lines after the version line.
func (s *ScenarioTrace) Frozen() ([]byte, error) {
	t, err := s.Derive()
	if err != nil {
		return nil, err
	}
	var body bytes.Buffer
	if err := Write(&body, t); err != nil {
		return nil, err
	}
	var out bytes.Buffer
	first, rest, _ := bytes.Cut(body.Bytes(), []byte("\n"))
	out.Write(first)
	out.WriteString("\n# scenario/" + s.Name + ", derived from the embedded " + s.Source + " (simgpu/trace/scenario.go)\n")
	for _, l := range s.How {
		out.WriteString("# " + l + "\n")
	}
	if s.Graph {
		out.WriteString("# Replay with fikit-replay --graph.\n")
	}
	out.Write(rest)
	return out.Bytes(), nil
}

func copyKernels(src *Trace) []Kernel { return append([]Kernel(nil), src.Kernels...) }

// scaleTo scales every duration by one factor so they sum to deviceNs, and
// gives every launch hostNs of host time.
func scaleTo(src *Trace, deviceNs, hostNs int64) *Trace {
	f := float64(deviceNs) / float64(src.GPUTimeNs())
	ks := copyKernels(src)
	for i := range ks {
		ks[i].DurationNs = max(1, int64(math.Round(float64(ks[i].DurationNs)*f)))
		ks[i].HostNs = hostNs
	}
	return &Trace{HasHostTime: true, Kernels: ks}
}

func scaled(k Kernel, f float64) Kernel {
	k.DurationNs = max(1, int64(math.Round(float64(k.DurationNs)*f)))
	k.HostNs = lpHostNs
	return k
}

// bertBase16 keeps the embeddings, 12 of the 24 layers (up to the 25th
// layer norm: one after the embeddings, two per layer) and the pooler (the
// last four kernels), and scales each kernel by its class.
func bertBase16(src *Trace) *Trace {
	var ks []Kernel
	norms := 0
	for _, k := range src.Kernels {
		if norms == 25 {
			break
		}
		if strings.Contains(k.Name, "layer_norm") {
			norms++
		}
		ks = append(ks, scaled(k, bertScale(k)))
	}
	for _, k := range src.Kernels[len(src.Kernels)-4:] {
		ks = append(ks, scaled(k, 1))
	}
	return &Trace{HasHostTime: true, Kernels: ks}
}

// bertScale is how one BERT-large (batch 2, sequence 512) kernel's work
// changes in BERT-base (batch 16, sequence 128): the attention's batched
// matmuls (cuBLAS tile 64x128 "tn" for scores, "nn" for the weighted sum)
// and the kernels over the score matrices (SM usage 288 and 1152, softmax)
// scale with heads x sequence², the other matmuls with tokens x hidden²,
// the other kernels with tokens x hidden.
func bertScale(k Kernel) float64 {
	gemm := strings.Contains(k.Name, "xmma_gemm")
	switch {
	case gemm && (strings.Contains(k.Name, "tilesize64x128") || strings.Contains(k.Name, "_nn_")):
		return 0.375
	case gemm:
		return 1.125
	case strings.Contains(k.Name, "softmax"),
		strings.Contains(k.Name, "elementwise") && (k.SMUsage == 288 || k.SMUsage == 1152):
		return 0.375
	}
	return 1.5
}

// trainResNet16 builds one training step (see ScenarioTraces).
func trainResNet16(src *Trace) *Trace {
	const batch = 4.0 // 16 / Orion's 4
	small := func(name string, ns int64) Kernel {
		return Kernel{Name: name, DurationNs: ns, HostNs: lpHostNs, Grid: [3]uint32{1, 1, 1}, Block: [3]uint32{256, 1, 1},
			Profile: ProfileUnknown}
	}
	var ks []Kernel
	for i := 0; i < 4; i++ { // optimizer.zero_grad()
		ks = append(ks, small("void at::native::multi_tensor_apply_kernel<zero_>", 10_000))
	}
	for _, k := range src.Kernels {
		ks = append(ks, scaled(k, batch))
	}
	ks = append(ks, small("void at::log_softmax_forward", 5000), small("void at::nll_loss_forward_reduce", 4000),
		small("void at::nll_loss_backward", 4000), small("void at::log_softmax_backward", 5000))
	for i := len(src.Kernels) - 1; i >= 0; i-- {
		k := scaled(src.Kernels[i], batch)
		if strings.HasPrefix(k.Name, "Conv-") || strings.Contains(k.Name, "gemm") {
			d, w := k, k
			d.Name, w.Name = "dgrad "+k.Name, "wgrad "+k.Name
			ks = append(ks, d, w)
			continue
		}
		b := scaled(src.Kernels[i], batch*1.5)
		b.Name = "backward " + k.Name
		ks = append(ks, b)
	}
	for i := 0; i < 8; i++ { // optimizer.step()
		ks = append(ks, small("void at::native::multi_tensor_apply_kernel<sgd_momentum>", 21_000))
	}
	return &Trace{HasHostTime: true, Kernels: ks}
}
