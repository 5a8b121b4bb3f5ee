package tests

// make image (docs/deploy.md "Container"): the image's structure, and the
// daemon run from it serving a hooked service on the host.

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"debug/elf"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// ociImage is what the test reads of an OCI image archive.
type ociImage struct {
	Config struct {
		Entrypoint   []string            `json:"Entrypoint"`
		Cmd          []string            `json:"Cmd"`
		ExposedPorts map[string]struct{} `json:"ExposedPorts"`
		Volumes      map[string]struct{} `json:"Volumes"`
		Labels       map[string]string   `json:"Labels"`
	} `json:"config"`
	OS           string `json:"os"`
	Architecture string `json:"architecture"`
	files        map[string]*tar.Header
	content      map[string][]byte // the ELF files' bytes
}

func TestImage(t *testing.T) {
	requireBins(t, "fikit", "libfikit_hook.so")
	tool := ""
	for _, name := range []string{"buildah", "podman"} {
		if _, err := exec.LookPath(name); err == nil {
			tool = name
			break
		}
	}
	if tool == "" {
		t.Skip("neither buildah nor podman is installed (apt-get install buildah podman): make image is not checked")
	}
	tag := fmt.Sprintf("localhost/fikit-test:%d", os.Getpid())
	r := makeIn(t, "image", "IMAGE="+tag)
	t.Cleanup(func() { _ = exec.Command(tool, "rmi", "-f", tag).Run() })
	if r.ExitCode != 0 {
		t.Fatalf("make image: %s", r)
	}
	archive := filepath.Join(repoRoot(t), "build", "fikit-image.tar")
	img := readOCIArchive(t, archive)

	// The structure: a static fikit as the entry point, serving the data
	// directory (a volume); the hook for the services; docs; no replayer.
	c := img.Config
	if img.OS != "linux" || img.Architecture != "amd64" {
		t.Errorf("image for %s/%s", img.OS, img.Architecture)
	}
	if !slices.Equal(c.Entrypoint, []string{"/usr/bin/fikit"}) || !slices.Equal(c.Cmd, []string{"serve", "--data-dir", "/var/lib/fikit"}) {
		t.Errorf("entry point %q, command %q", c.Entrypoint, c.Cmd)
	}
	if _, ok := c.Volumes["/var/lib/fikit"]; !ok {
		t.Errorf("volumes %v: want /var/lib/fikit", c.Volumes)
	}
	if _, ok := c.ExposedPorts["7070/udp"]; !ok {
		t.Errorf("exposed ports %v: want 7070/udp", c.ExposedPorts)
	}
	if c.Labels["org.opencontainers.image.title"] != "fikit" || c.Labels["org.opencontainers.image.version"] == "" {
		t.Errorf("labels %v", c.Labels)
	}
	for _, f := range []string{"usr/bin/fikit", "usr/lib/fikit/libfikit_hook.so", "usr/share/doc/fikit/docs/deploy.md",
		"etc/passwd", "etc/group", "tmp", "var/lib/fikit"} {
		if img.files[f] == nil {
			t.Errorf("the image has no %s", f)
		}
	}
	for f := range img.files {
		if strings.Contains(f, "fikit-replay") || strings.Contains(f, "libcuda") || strings.Contains(f, "systemd") {
			t.Errorf("the image holds %s: the replayer, simgpu and the unit are not the daemon's", f)
		}
	}
	if h := img.files["tmp"]; h != nil && h.Mode&0o1777 != 0o1777 {
		t.Errorf("/tmp mode %o", h.Mode)
	}
	if b := img.content["usr/bin/fikit"]; b != nil {
		f, err := elf.NewFile(bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range f.Progs {
			if p.Type == elf.PT_INTERP {
				t.Error("the image's fikit is dynamically linked: it would need a libc the image does not have")
			}
		}
	}
	t.Logf("%s: %d files; entry point %q %q", filepath.Base(archive), len(img.files), c.Entrypoint, c.Cmd)

	podmanRun(t, archive)
}

// podmanRun runs the daemon from the image as a deployment would (host
// network and pid namespace, the data directory mounted at its own path)
// and a hooked service on the host: the service maps the board, the
// daemon verifies its pid and sees it exit, and stops cleanly.
func podmanRun(t *testing.T, archive string) {
	podman, err := exec.LookPath("podman")
	if err != nil {
		t.Skip("podman is not installed: the image is built and checked, not run")
	}
	bins := requireBins(t, "fikit", "fikit-replay")
	// Where podman's defaults cannot run a container (here: crun refuses
	// hybrid cgroups, and raising the container's rlimits needs
	// CAP_SYS_RESOURCE), runc with rlimits no higher than podman's own.
	var opts []string
	var why []string
	for _, o := range [][]string{nil, {"--runtime", "runc", "--ulimit", "nofile=1024:1024", "--ulimit", "nproc=32768:32768"}} {
		args := append(append([]string{"run", "--rm", "--network", "host"}, o...), "oci-archive:"+archive, "version")
		r := runCmd(t, 2*time.Minute, nil, podman, args...)
		if r.ExitCode == 0 && strings.Contains(r.Stdout, "fikit") {
			opts = o
			why = nil
			break
		}
		why = append(why, fmt.Sprintf("podman %s: %s", strings.Join(args, " "), lastLine(r.Stderr)))
	}
	if why != nil {
		t.Skipf("podman cannot run a container here; the image was built and checked:\n%s", strings.Join(why, "\n"))
	}
	t.Logf("podman runs containers with options %q", opts)

	dataDir, err := os.MkdirTemp("", "fikit-image-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dataDir) })
	addr := freeUDPAddr(t)
	name := fmt.Sprintf("fikit-test-%d", os.Getpid())
	args := append([]string{"run", "-d", "--name", name, "--network", "host", "--pid", "host",
		"--cap-add", "SYS_NICE", "--cap-add", "SYS_PTRACE", "-v", dataDir + ":" + dataDir}, opts...)
	args = append(args, "oci-archive:"+archive, "serve", "--data-dir", dataDir, "--listen", addr)
	if r := runCmd(t, 2*time.Minute, nil, podman, args...); r.ExitCode != 0 {
		t.Fatalf("podman run the daemon: %s", r)
	}
	t.Cleanup(func() { _ = exec.Command(podman, "rm", "-f", name).Run() })
	logs := func() string { return runCmd(t, 30*time.Second, nil, podman, "logs", name).Stderr }
	if !waitFor(20*time.Second, func() bool {
		return runCmd(t, 5*time.Second, nil, bins[0], "status", "--data-dir", dataDir).ExitCode == 0
	}) {
		t.Fatalf("the daemon in the container does not answer on %s:\n%s", dataDir, logs())
	}

	// A hooked service on the host.
	env := simgpuEnv(t, uniqueShm(t), "FIKIT_LOG=info", "FIKIT_CONNECT_TIMEOUT_MS=3000")
	svc := startCmd(t, env, bins[0], "run", "-p", "2", "--task-key", "image-svc", "--scheduler", addr, "--",
		bins[1], "--trace", "h100/resnet50_4_fwd", "--runs", "2000", "--interval", "5ms", "--quiet")
	var verified bool
	waitFor(20*time.Second, func() bool {
		var st struct {
			Tasks []struct {
				Key      string `json:"task_key"`
				PID      int    `json:"pid"`
				Verified bool   `json:"pid_verified"`
			} `json:"tasks"`
		}
		r := runCmd(t, 5*time.Second, nil, bins[0], "status", "--data-dir", dataDir, "--json")
		if json.Unmarshal([]byte(r.Stdout), &st) == nil {
			for _, ta := range st.Tasks {
				verified = verified || ta.Key == "image-svc" && ta.Verified
			}
		}
		return verified
	})
	if !verified {
		t.Errorf("the daemon in the container did not verify the host service's pid (--pid host)\n%s", logs())
	}
	svc.signal(15)
	sr := svc.Wait(20 * time.Second)
	if !strings.Contains(sr.Stderr, "sharing the scheduler's board "+filepath.Join(dataDir, "board")) {
		t.Errorf("the host service did not map the container daemon's board:\n%s", tail(sr.Stderr, 20))
	}
	// A service that ends normally says Goodbye ("task left"); one the
	// daemon sees end without it, through the pid it watches, "exited".
	left := func() bool {
		l := logs()
		return strings.Contains(l, "key=image-svc") && (strings.Contains(l, "task left") || strings.Contains(l, "exited"))
	}
	if !waitFor(10*time.Second, left) {
		t.Errorf("the daemon did not see the service exit:\n%s", logs())
	}
	if r := runCmd(t, time.Minute, nil, podman, "stop", "-t", "10", name); r.ExitCode != 0 {
		t.Fatalf("podman stop: %s", r)
	}
	code := runCmd(t, 30*time.Second, nil, podman, "inspect", name, "--format", "{{.State.ExitCode}}")
	if strings.TrimSpace(code.Stdout) != "0" {
		t.Errorf("the daemon exited with %q on SIGTERM:\n%s", strings.TrimSpace(code.Stdout), logs())
	}
	if !strings.Contains(logs(), "fikit daemon stopped") {
		t.Errorf("no clean stop in the daemon's log:\n%s", logs())
	}
}

// readOCIArchive reads an OCI image layout archive: the first manifest's
// config and its layers' file headers, with the content of ELF files.
func readOCIArchive(t *testing.T, path string) *ociImage {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	blobs := map[string][]byte{}
	readTar(t, f, func(name string, h *tar.Header, content func() []byte) {
		if h.Typeflag == tar.TypeReg {
			blobs[name] = content()
		}
	})
	blob := func(digest string) []byte {
		b, ok := blobs["blobs/"+strings.Replace(digest, ":", "/", 1)]
		if !ok {
			t.Fatalf("%s: no blob %s", path, digest)
		}
		return b
	}
	var index, manifest struct {
		Manifests []struct{ Digest string } `json:"manifests"`
		Config    struct{ Digest string }   `json:"config"`
		Layers    []struct {
			Digest    string `json:"digest"`
			MediaType string `json:"mediaType"`
		} `json:"layers"`
	}
	if err := json.Unmarshal(blobs["index.json"], &index); err != nil || len(index.Manifests) == 0 {
		t.Fatalf("%s: index.json: %v", path, err)
	}
	if err := json.Unmarshal(blob(index.Manifests[0].Digest), &manifest); err != nil {
		t.Fatalf("manifest: %v", err)
	}
	img := &ociImage{files: map[string]*tar.Header{}, content: map[string][]byte{}}
	if err := json.Unmarshal(blob(manifest.Config.Digest), img); err != nil {
		t.Fatalf("config: %v", err)
	}
	for _, l := range manifest.Layers {
		var r io.Reader = bytes.NewReader(blob(l.Digest))
		switch {
		case strings.HasSuffix(l.MediaType, "+gzip"):
			if r, err = gzip.NewReader(r); err != nil {
				t.Fatal(err)
			}
		case strings.HasSuffix(l.MediaType, ".tar"):
		default:
			t.Fatalf("layer of type %s", l.MediaType)
		}
		readTar(t, r, func(name string, h *tar.Header, content func() []byte) {
			img.files[name] = h
			if h.Typeflag == tar.TypeReg && strings.HasPrefix(name, "usr/bin/") {
				img.content[name] = content()
			}
		})
	}
	return img
}

// readTar calls fn for each entry of the tar stream r, with its name
// without "./" or slashes around it, and a function reading its content.
func readTar(t *testing.T, r io.Reader, fn func(name string, h *tar.Header, content func() []byte)) {
	t.Helper()
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		fn(strings.Trim(strings.TrimPrefix(h.Name, "./"), "/"), h, func() []byte {
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			return b
		})
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}
