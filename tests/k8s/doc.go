// Package k8s is `make test-k8s`: fikit against a real kube-apiserver and
// etcd (built once by tools.sh from the Go module proxy and cached outside
// the repository), and the Helm chart (deploy/helm/fikit) rendered with
// helm's Go packages. It is a module of its own, so that neither helm nor
// the API server's client enters fikit's go.mod requirements for the
// binary or `make test`'s build; its tests build with the `k8s` tag, which
// also compiles the daemon's informer (k8s/pods/informer).
package k8s
