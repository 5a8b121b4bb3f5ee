package webhook

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Annotations a pod may carry, and the one the webhook writes.
const (
	// AnnInject "false" (or "disabled") opts a pod out.
	AnnInject = "fikit.io/inject"
	// AnnPriority, AnnWeight and AnnTaskKey become FIKIT_PRIORITY,
	// FIKIT_WEIGHT and FIKIT_TASK_KEY; the daemon's policy caps the first
	// two whatever they say.
	AnnPriority = "fikit.io/priority"
	AnnWeight   = "fikit.io/weight"
	AnnTaskKey  = "fikit.io/task-key"
	// AnnInjected is what the webhook did: "true", or why not.
	AnnInjected = "fikit.io/injected"
)

// Volume names the webhook adds (and finds again on reinvocation).
const (
	VolHook  = "fikit-hook"
	VolSock  = "fikit-sock"
	VolReply = "fikit-reply"
)

// Outcomes, the label of fikit_webhook_pods_total.
const (
	Mutated        = "mutated"          // at least one container put under the hook
	AlreadyDone    = "already-injected" // reinvocation: nothing left to do
	NoGPU          = "no-gpu"           // no container asks for a GPU resource
	OptedOut       = "opted-out"        // fikit.io/inject: "false"
	PreloadFromRef = "ld-preload-valuefrom"
	BadAnnotation  = "bad-annotation"
	NotAPod        = "not-a-pod"
	Undecodable    = "undecodable"
)

// ErrBadPod is a request whose object the webhook cannot read as a pod.
var ErrBadPod = errors.New("webhook: not a pod")

// Config is where the node's fikit files are, and what counts as a GPU.
type Config struct {
	// HookDir is the host directory the daemon's init container copies
	// the hook into (as $LIB variants: lib, lib64, lib/x86_64-linux-gnu),
	// mounted read-only at the same path.
	HookDir string
	// SockDir holds the daemon's socket (hooks.sock), mounted read-only.
	SockDir string
	// ReplyDir is where hooks bind their reply sockets (mode 1733),
	// mounted read-write.
	ReplyDir string
	// GPUResources are resource names (or prefixes ending in '*') that
	// count as asking for a GPU.
	GPUResources []string
}

// DefaultConfig is the chart's layout.
func DefaultConfig() Config {
	return Config{HookDir: "/run/fikit/lib", SockDir: "/run/fikit/sock", ReplyDir: "/run/fikit/c",
		GPUResources: []string{"nvidia.com/gpu", "nvidia.com/gpu.shared", "nvidia.com/mig-*"}}
}

// Preload is the LD_PRELOAD entry: glibc's loader expands $LIB (to lib64,
// lib/x86_64-linux-gnu, … as the image's glibc was built), where the hook
// is copied under each name; musl's loader does not expand it, finds no
// such file and, as it does for any missing preload, starts the program
// without it. The hook needs glibc: so a musl image starts un-hooked
// instead of failing to load it (docs/kubernetes.md).
func (c Config) Preload() string { return c.HookDir + "/$LIB/libfikit_hook.so" }

// Op is one JSON Patch operation.
type Op struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value,omitempty"`
}

// Mutate decides what to do with a pod: the patch (none when the outcome
// is not Mutated) and the outcome. A container that already sets
// LD_PRELOAD by value keeps it, the hook appended; one that sets it from a
// reference (valueFrom) is left alone, as is the pod if it has no other.
func (c Config) Mutate(raw []byte) ([]Op, string, error) {
	var pod Pod
	if err := json.Unmarshal(raw, &pod); err != nil {
		return nil, Undecodable, fmt.Errorf("%w: %w", ErrBadPod, err)
	}
	ann := pod.Metadata.Annotations
	switch strings.ToLower(ann[AnnInject]) {
	case "false", "disabled", "no":
		return c.mark(pod, OptedOut), OptedOut, nil
	}
	env, err := c.env(pod)
	if err != nil {
		return c.mark(pod, BadAnnotation), BadAnnotation, err
	}
	var ops []Op
	gpu, done, fromRef := 0, 0, 0
	for i, ct := range pod.Spec.Containers {
		if !c.asksGPU(ct) {
			continue
		}
		gpu++
		o, state := c.container(i, ct, env)
		switch state {
		case containerDone:
			done++
		case containerFromRef:
			fromRef++
		}
		ops = append(ops, o...)
	}
	switch {
	case gpu == 0:
		return c.mark(pod, NoGPU), NoGPU, nil
	case len(ops) == 0 && fromRef > 0:
		return c.mark(pod, PreloadFromRef), PreloadFromRef, nil
	case len(ops) == 0:
		return nil, AlreadyDone, nil
	}
	ops = append(c.volumes(pod), ops...)
	ops = append(ops, c.annotate(pod, "true")...)
	return ops, Mutated, nil
}

type containerState int

const (
	containerChanged containerState = iota
	containerDone
	containerFromRef
)

// container is the patch for one GPU container.
func (c Config) container(i int, ct Container, env []Env) ([]Op, containerState) {
	base := "/spec/containers/" + strconv.Itoa(i)
	var ops []Op
	preload := -1
	has := map[string]bool{}
	for j, e := range ct.Env {
		has[e.Name] = true
		if e.Name == "LD_PRELOAD" {
			preload = j
		}
	}
	switch {
	case preload < 0:
		ops = append(ops, addEnv(base, ct.Env == nil && len(ops) == 0, Env{Name: "LD_PRELOAD", Value: c.Preload()})...)
	case len(ct.Env[preload].ValueFrom) > 0:
		return nil, containerFromRef
	case !strings.Contains(ct.Env[preload].Value, c.Preload()):
		v := strings.TrimRight(ct.Env[preload].Value, ": ")
		if v != "" {
			v += ":"
		}
		ops = append(ops, Op{Op: "replace", Path: base + "/env/" + strconv.Itoa(preload) + "/value", Value: v + c.Preload()})
	}
	for _, e := range env {
		if !has[e.Name] {
			ops = append(ops, addEnv(base, ct.Env == nil && len(ops) == 0, e)...)
		}
	}
	mounted := map[string]bool{}
	for _, m := range ct.VolumeMounts {
		mounted[m.Name] = true
	}
	first := ct.VolumeMounts == nil
	for _, m := range c.mounts() {
		if mounted[m.Name] {
			continue
		}
		if first {
			ops = append(ops, Op{Op: "add", Path: base + "/volumeMounts", Value: []Mount{m}})
			first = false
		} else {
			ops = append(ops, Op{Op: "add", Path: base + "/volumeMounts/-", Value: m})
		}
	}
	if len(ops) == 0 {
		return nil, containerDone
	}
	return ops, containerChanged
}

// addEnv adds one variable; the first to a container without env makes
// the list.
func addEnv(base string, makeList bool, e Env) []Op {
	if makeList {
		return []Op{{Op: "add", Path: base + "/env", Value: []Env{e}}}
	}
	return []Op{{Op: "add", Path: base + "/env/-", Value: e}}
}

// env is the variables every GPU container gets, from the pod's
// annotations.
func (c Config) env(pod Pod) ([]Env, error) {
	ann := pod.Metadata.Annotations
	env := []Env{{Name: "FIKIT_SCHEDULER", Value: "unix:" + c.SockDir + "/hooks.sock"}}
	if v, ok := ann[AnnPriority]; ok {
		n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 8)
		if err != nil || n > 9 {
			return nil, fmt.Errorf("webhook: %s=%q is not 0–9", AnnPriority, v)
		}
		env = append(env, Env{Name: "FIKIT_PRIORITY", Value: strconv.FormatUint(n, 10)})
	}
	if v, ok := ann[AnnWeight]; ok {
		n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 32)
		if err != nil || n < 1 || n > 100 {
			return nil, fmt.Errorf("webhook: %s=%q is not 1–100", AnnWeight, v)
		}
		env = append(env, Env{Name: "FIKIT_WEIGHT", Value: strconv.FormatUint(n, 10)})
	}
	if v := ann[AnnTaskKey]; v != "" {
		env = append(env, Env{Name: "FIKIT_TASK_KEY", Value: v})
	}
	return env, nil
}

func (c Config) mounts() []Mount {
	return []Mount{
		{Name: VolHook, MountPath: c.HookDir, ReadOnly: true},
		{Name: VolSock, MountPath: c.SockDir, ReadOnly: true},
		{Name: VolReply, MountPath: c.ReplyDir},
	}
}

// volumes adds the hostPath volumes the pod lacks.
func (c Config) volumes(pod Pod) []Op {
	have := map[string]bool{}
	for _, v := range pod.Spec.Volumes {
		have[v.Name] = true
	}
	var ops []Op
	first := pod.Spec.Volumes == nil
	for _, v := range []Volume{
		{Name: VolHook, HostPath: HostPath{Path: c.HookDir, Type: "Directory"}},
		{Name: VolSock, HostPath: HostPath{Path: c.SockDir, Type: "Directory"}},
		{Name: VolReply, HostPath: HostPath{Path: c.ReplyDir, Type: "Directory"}},
	} {
		if have[v.Name] {
			continue
		}
		if first {
			ops = append(ops, Op{Op: "add", Path: "/spec/volumes", Value: []Volume{v}})
			first = false
		} else {
			ops = append(ops, Op{Op: "add", Path: "/spec/volumes/-", Value: v})
		}
	}
	return ops
}

// mark is the patch that records on a pod why it was left alone (none
// where it already says so).
func (c Config) mark(pod Pod, why string) []Op {
	if pod.Metadata.Annotations[AnnInjected] == why {
		return nil
	}
	return c.annotate(pod, why)
}

func (c Config) annotate(pod Pod, v string) []Op {
	if pod.Metadata.Annotations == nil {
		return []Op{{Op: "add", Path: "/metadata/annotations", Value: map[string]string{AnnInjected: v}}}
	}
	return []Op{{Op: "add", Path: "/metadata/annotations/" + escape(AnnInjected), Value: v}}
}

// escape is a JSON Pointer token (RFC 6901).
func escape(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

// asksGPU reports whether a container's limits or requests name a GPU
// resource.
func (c Config) asksGPU(ct Container) bool {
	for _, m := range []map[string]json.RawMessage{ct.Resources.Limits, ct.Resources.Requests} {
		for name, q := range m {
			if c.isGPU(name) && !isZero(q) {
				return true
			}
		}
	}
	return false
}

func (c Config) isGPU(name string) bool {
	for _, r := range c.GPUResources {
		if p, ok := strings.CutSuffix(r, "*"); ok && strings.HasPrefix(name, p) || name == r {
			return true
		}
	}
	return false
}

// isZero reports a quantity of "0" (as a string or a number).
func isZero(q json.RawMessage) bool {
	s := strings.Trim(string(q), `" `)
	return s == "0"
}
