// Package webhook is `fikit webhook`: a Kubernetes mutating admission
// webhook (admission.k8s.io/v1 AdmissionReview over HTTPS) that puts pods'
// GPU containers under the hook. The chart's MutatingWebhookConfiguration
// sends it pod CREATEs in namespaces labelled fikit.io/inject=enabled; for
// each container that asks for a GPU resource it adds the hook to
// LD_PRELOAD, FIKIT_SCHEDULER (the node's unix socket) and the priority,
// weight and task key from the pod's annotations, and mounts the hook's
// directory and the socket directory read-only and the reply directory
// read-write (docs/kubernetes.md).
//
// It answers with a JSON Patch and never rewrites the pod, so fields it
// does not know survive; it reads only the few fields it needs, with
// encoding/json (no Kubernetes Go modules). A second call on a mutated pod
// (reinvocation) changes nothing it already did. A pod it leaves alone is
// counted by reason in fikit_webhook_pods_total and annotated
// fikit.io/injected=REASON where it can say why, never silently skipped.
package webhook
