// Package pods is what the daemon asks about a pod: its namespace, service
// account and annotations by pod UID ([Lookup]). The daemon depends on this
// interface alone; [Static] is an in-memory implementation for tests and
// for a daemon without Kubernetes, and package pods/informer (built only
// with the `k8s` build tag) implements it with a client-go informer
// limited to the daemon's node, so that neither the daemon's other code
// nor `make test` compiles client-go.
package pods
