// Package podid finds the Kubernetes pod a process runs in from its cgroup
// path (/proc/PID/cgroup), as the kubelet names it: cgroup v1 and v2, the
// systemd driver (kubepods.slice/kubepods-burstable.slice/
// kubepods-burstable-pod<UID with _>.slice/cri-containerd-<ID>.scope) and
// the cgroupfs driver (kubepods/burstable/pod<UID>/<ID>), containerd,
// CRI-O and Docker container names, and paths relative to a cgroup
// namespace ("/../../kubepods-…"), as a daemon that runs in a pod with its
// own cgroup namespace sees them.
//
// The first pod component from the root decides: a container that may
// create cgroups below its own (cgroup v2 delegation) can name a sub-cgroup
// like another pod's, but never above its own, where the kubelet named it.
// Lines of a v1 file that name different pods are an error (ErrAmbiguous).
// A path that names no pod (a host service) is ErrNoPod: the caller keeps
// its uid rules for it.
package podid
