package podid

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

const (
	uid       = "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"
	container = "3b7f2c9d1e8a4f6b5c0d2e9f8a7b6c5d4e3f2a1b0c9d8e7f6a5b4c3d2e1f0a9b"
)

// TestFixtures reads every file in testdata/: each is a /proc/PID/cgroup
// as a process sees it under one runtime, driver and cgroup version.
func TestFixtures(t *testing.T) {
	want := map[string]struct {
		pod Pod
		err error
	}{
		"v2-systemd-containerd.cgroup":  {pod: Pod{UID: uid, QoS: "burstable", Container: container}},
		"v2-systemd-crio.cgroup":        {pod: Pod{UID: uid, QoS: "besteffort", Container: container}},
		"v2-systemd-guaranteed.cgroup":  {pod: Pod{UID: uid, QoS: "guaranteed", Container: container}},
		"v2-cgroupfs-containerd.cgroup": {pod: Pod{UID: uid, QoS: "burstable", Container: container}},
		"v2-cgroupfs-crio.cgroup":       {pod: Pod{UID: uid, QoS: "besteffort", Container: container}},
		"v2-cgroupfs-guaranteed.cgroup": {pod: Pod{UID: uid, QoS: "guaranteed", Container: container}},
		"v2-cgroupns-systemd.cgroup":    {pod: Pod{UID: uid, QoS: "burstable", Container: container}},
		"v2-cgroupns-cgroupfs.cgroup":   {pod: Pod{UID: uid, QoS: "burstable", Container: container}},
		"v2-cgroupns-nested.cgroup":     {pod: Pod{UID: uid, QoS: "burstable", Container: container}},
		"v1-cgroupfs-containerd.cgroup": {pod: Pod{UID: uid, QoS: "burstable", Container: container}},
		"v1-systemd-crio-hybrid.cgroup": {pod: Pod{UID: uid, QoS: "besteffort", Container: container}},
		"v1-docker.cgroup":              {pod: Pod{UID: uid, QoS: "besteffort", Container: container}},
		"v2-static-pod.cgroup":          {pod: Pod{UID: "0123456789abcdef0123456789abcdef", QoS: "burstable", Container: container}},
		// A container that may make cgroups below its own names one like
		// another pod's: the outer one, the kubelet's, decides.
		"v2-nested-forgery.cgroup": {pod: Pod{UID: uid, QoS: "burstable", Container: container}},
		"v2-host-service.cgroup":   {err: ErrNoPod},
		"v2-host-session.cgroup":   {err: ErrNoPod},
		"v1-host-service.cgroup":   {err: ErrNoPod},
		"v1-ambiguous.cgroup":      {err: ErrAmbiguous},
		"malformed.cgroup":         {err: ErrMalformed},
		"empty.cgroup":             {err: ErrMalformed},
	}
	files, err := filepath.Glob("testdata/*.cgroup")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != len(want) {
		t.Errorf("%d fixtures, %d expectations: every fixture needs one", len(files), len(want))
	}
	for _, f := range files {
		name := filepath.Base(f)
		w, ok := want[name]
		if !ok {
			t.Errorf("%s: no expectation", name)
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		got, err := Parse(b)
		if w.err != nil {
			if !errors.Is(err, w.err) {
				t.Errorf("%s: err %v, want %v", name, err, w.err)
			}
			continue
		}
		if err != nil || got != w.pod {
			t.Errorf("%s: %+v, %v; want %+v", name, got, err, w.pod)
		}
	}
}

func TestParsePathRejects(t *testing.T) {
	for _, p := range []string{
		"/kubepods/burstable/podnot-a-uid/abc",
		"/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod0f1e2d3c-4b5a.slice",
		"/system.slice/pod-0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0.service",
		"/kubepods/burstable/pod0f1e2d3c_4b5a_6978_8796_a5b4c3d2e1f0/abc", // cgroupfs keeps dashes
		"/kubepods.slice/kubepods-pod0f1e2d3cx4b5a_6978_8796_a5b4c3d2e1f0.slice",
		"/machine.slice/libpod-" + container + ".scope",
		"/",
	} {
		if pod, ok := ParsePath(p); ok {
			t.Errorf("ParsePath(%q) = %+v, want no pod", p, pod)
		}
	}
}

// TestOf reads this process's own cgroup: it runs on a host or in a
// container that is no kubelet's here, so it names no pod, and a missing
// pid is an error wrapping os.ErrNotExist.
func TestOf(t *testing.T) {
	if _, err := os.Stat("/proc/self/cgroup"); err != nil {
		t.Skip("no /proc/self/cgroup")
	}
	if _, err := Of("", os.Getpid()); err != nil && !errors.Is(err, ErrNoPod) {
		t.Errorf("Of(self): %v", err)
	}
	dir := t.TempDir()
	if _, err := Of(dir, 1); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Of(missing): %v, want ErrNotExist", err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "7"), 0o755); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile("testdata/v2-systemd-containerd.cgroup")
	if err := os.WriteFile(filepath.Join(dir, strconv.Itoa(7), "cgroup"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	if p, err := Of(dir, 7); err != nil || p.UID != uid {
		t.Errorf("Of(fixture) = %+v, %v", p, err)
	}
}

// FuzzParse: no input panics; a pod found has a UID of the two forms, and
// parsing is stable under a trailing newline.
func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob("testdata/*.cgroup")
	for _, file := range files {
		b, _ := os.ReadFile(file)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := Parse(b)
		if err != nil {
			if !errors.Is(err, ErrNoPod) && !errors.Is(err, ErrAmbiguous) && !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v wraps no sentinel", err)
			}
			return
		}
		if _, ok := normUID(p.UID); !ok || (len(p.UID) != 36 && len(p.UID) != 32) {
			t.Fatalf("UID %q", p.UID)
		}
		if p.QoS != "guaranteed" && p.QoS != "burstable" && p.QoS != "besteffort" {
			t.Fatalf("QoS %q", p.QoS)
		}
		if len(b) < MaxFile {
			if q, err := Parse(append(append([]byte(nil), b...), '\n')); err != nil || q != p {
				t.Fatalf("with a newline: %+v, %v; without: %+v", q, err, p)
			}
		}
	})
}
