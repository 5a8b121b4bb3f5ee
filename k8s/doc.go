// Package k8s holds what fikit needs to serve pods on Kubernetes (issue 35,
// docs/kubernetes.md). Its packages depend on nothing of Kubernetes' own Go
// modules, so that the daemon and `make test` do not grow with client-go:
//
//   - podid: which pod a process is in, from its /proc/PID/cgroup;
//   - pods: the PodLookup interface (pod UID → namespace, service account,
//     annotations) the daemon asks, and an in-memory implementation;
//   - pods/informer: PodLookup from a client-go informer, built only with
//     the `k8s` build tag (`make fikit-k8s`, `make image`);
//   - webhook: `fikit webhook`, the mutating admission webhook.
package k8s
