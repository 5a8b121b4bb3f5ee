package podid

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Sentinel errors; each error returned wraps one of them.
var (
	// ErrNoPod is a cgroup file that names no pod (a host service, or a
	// process of the node outside kubepods).
	ErrNoPod = errors.New("cgroup names no pod")
	// ErrAmbiguous is a cgroup file whose lines name different pods.
	ErrAmbiguous = errors.New("cgroup lines name different pods")
	// ErrMalformed is a cgroup file that is not one (no line
	// "ID:CONTROLLERS:PATH").
	ErrMalformed = errors.New("malformed cgroup file")
)

// MaxFile bounds the bytes of a cgroup file read: a v1 file has a line per
// hierarchy (about 13), each a path of at most a few hundred bytes.
const MaxFile = 64 << 10

// Pod is the pod a cgroup path names.
type Pod struct {
	// UID is the pod's metadata.uid as the API server writes it (dashes,
	// lower case), or a static pod's 32 hex digits.
	UID string
	// QoS is the pod's QoS class as the kubelet's cgroup says it:
	// "guaranteed", "burstable" or "besteffort".
	QoS string
	// Container is the container's ID where the path names one (the first
	// component below the pod's that is a container's: cri-containerd-ID.scope,
	// crio-ID.scope, docker-ID.scope, or a bare ID with the cgroupfs
	// driver), else "".
	Container string
}

// Of reads /proc/PID/cgroup under proc ("/proc" when empty) and returns the
// pod it names.
func Of(proc string, pid int) (Pod, error) {
	if proc == "" {
		proc = "/proc"
	}
	f, err := os.Open(proc + "/" + strconv.Itoa(pid) + "/cgroup")
	if err != nil {
		return Pod{}, fmt.Errorf("pod of pid %d: %w", pid, err)
	}
	defer f.Close()
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(&limitedReader{f, MaxFile}); err != nil {
		return Pod{}, fmt.Errorf("pod of pid %d: %w", pid, err)
	}
	p, err := Parse(buf.Bytes())
	if err != nil {
		return Pod{}, fmt.Errorf("pod of pid %d: %w", pid, err)
	}
	return p, nil
}

type limitedReader struct {
	f *os.File
	n int
}

func (l *limitedReader) Read(p []byte) (int, error) {
	if l.n <= 0 {
		return 0, fmt.Errorf("%w: longer than %d bytes", ErrMalformed, MaxFile)
	}
	if len(p) > l.n {
		p = p[:l.n]
	}
	n, err := l.f.Read(p)
	l.n -= n
	return n, err
}

// Parse reads the content of a /proc/PID/cgroup file: one line per
// hierarchy, "ID:CONTROLLERS:PATH" (v2's single line is "0::PATH"). Every
// line that names a pod must name the same one; the v2 line's container ID
// is preferred where lines differ in that.
func Parse(b []byte) (Pod, error) {
	if len(b) > MaxFile {
		return Pod{}, fmt.Errorf("%w: longer than %d bytes", ErrMalformed, MaxFile)
	}
	var found Pod
	lines := 0
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 4096), MaxFile)
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			continue
		}
		id, rest, ok1 := strings.Cut(line, ":")
		_, path, ok2 := strings.Cut(rest, ":")
		if !ok1 || !ok2 || !isDigits(id) || !strings.HasPrefix(path, "/") {
			return Pod{}, fmt.Errorf("%w: line %q", ErrMalformed, line)
		}
		lines++
		p, ok := ParsePath(path)
		if !ok {
			continue
		}
		switch {
		case found.UID == "":
			found = p
		case found.UID != p.UID:
			return Pod{}, fmt.Errorf("%w: %s and %s", ErrAmbiguous, found.UID, p.UID)
		case id == "0" && p.Container != "":
			found.Container = p.Container
		}
	}
	if err := sc.Err(); err != nil {
		return Pod{}, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	if lines == 0 {
		return Pod{}, fmt.Errorf("%w: no line", ErrMalformed)
	}
	if found.UID == "" {
		return Pod{}, ErrNoPod
	}
	return found, nil
}

// ParsePath finds the pod in one cgroup path: its first component, from the
// root, that the kubelet names for a pod, with the QoS class from that
// component or its parent and the container ID from the first container
// component below it.
func ParsePath(path string) (Pod, bool) {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	for i, c := range parts {
		uid, qos, ok := podComponent(c)
		if !ok {
			continue
		}
		if qos == "" && i > 0 {
			qos = qosOf(parts[i-1])
		}
		if qos == "" {
			qos = "guaranteed"
		}
		p := Pod{UID: uid, QoS: qos}
		for _, c := range parts[i+1:] {
			if p.Container = containerID(c); p.Container != "" {
				break
			}
		}
		return p, true
	}
	return Pod{}, false
}

// podComponent reads a pod's cgroup name: systemd's
// "kubepods[-QOS]-pod<UID, dashes as _>.slice" or cgroupfs's "pod<UID>".
func podComponent(c string) (uid, qos string, ok bool) {
	if s, ok := strings.CutSuffix(c, ".slice"); ok {
		s, ok = strings.CutPrefix(s, "kubepods-")
		if !ok {
			return "", "", false
		}
		for _, q := range []string{"besteffort-", "burstable-"} {
			if rest, ok := strings.CutPrefix(s, q); ok {
				qos, s = strings.TrimSuffix(q, "-"), rest
				break
			}
		}
		s, ok = strings.CutPrefix(s, "pod")
		if !ok {
			return "", "", false
		}
		uid, ok := normUID(strings.ReplaceAll(s, "_", "-"))
		if qos == "" {
			qos = "guaranteed"
		}
		return uid, qos, ok
	}
	s, ok := strings.CutPrefix(c, "pod")
	if !ok {
		return "", "", false
	}
	uid, ok = normUID(s)
	return uid, "", ok
}

// qosOf is the QoS class a pod component's parent names ("" where it
// names none: the pod is guaranteed, or the parent is above the cgroup
// namespace's root).
func qosOf(parent string) string {
	switch parent {
	case "burstable", "kubepods-burstable.slice":
		return "burstable"
	case "besteffort", "kubepods-besteffort.slice":
		return "besteffort"
	case "kubepods", "kubepods.slice":
		return "guaranteed"
	}
	return ""
}

// normUID checks a pod UID: a UUID (8-4-4-4-12 hex digits) or a static
// pod's 32 hex digits, returned in lower case.
func normUID(s string) (string, bool) {
	s = strings.ToLower(s)
	switch len(s) {
	case 36:
		for i := range len(s) {
			if i == 8 || i == 13 || i == 18 || i == 23 {
				if s[i] != '-' {
					return "", false
				}
			} else if !isHex(s[i]) {
				return "", false
			}
		}
	case 32:
		for i := range len(s) {
			if !isHex(s[i]) {
				return "", false
			}
		}
	default:
		return "", false
	}
	return s, true
}

// containerID is the container ID a container's cgroup name carries
// ("" for a name that is not a container's).
func containerID(c string) string {
	s := c
	if t, ok := strings.CutSuffix(s, ".scope"); ok {
		s = t
		cut := false
		for _, pre := range []string{"cri-containerd-", "crio-", "docker-", "cri-o-"} {
			if t, ok := strings.CutPrefix(s, pre); ok {
				s, cut = t, true
				break
			}
		}
		if !cut {
			return ""
		}
	} else if t, ok := strings.CutPrefix(s, "crio-"); ok {
		s = t
	}
	if len(s) < 12 || len(s) > 128 {
		return ""
	}
	for i := range len(s) {
		if !isHex(s[i]) {
			return ""
		}
	}
	return strings.ToLower(s)
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := range len(s) {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
