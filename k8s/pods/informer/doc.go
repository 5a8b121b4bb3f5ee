// Package informer implements pods.Lookup with a client-go informer that
// lists and watches the pods of one node (field selector spec.nodeName;
// RBAC: get, list and watch on pods, nothing else). Its code is built only
// with the `k8s` build tag, so that `make test` and the default fikit
// binary do not compile client-go; `make fikit-k8s` and `make image` build
// with it, and `make test-k8s` tests it against a real API server.
package informer
