package webhook

import "encoding/json"

// The parts of admission.k8s.io/v1 and core/v1 the webhook reads. Decoding
// ignores the rest; the answer is a patch, so nothing is lost.

// Review is an AdmissionReview.
type Review struct {
	APIVersion string    `json:"apiVersion"`
	Kind       string    `json:"kind"`
	Request    *Request  `json:"request,omitempty"`
	Response   *Response `json:"response,omitempty"`
}

// Request is an AdmissionRequest.
type Request struct {
	UID       string          `json:"uid"`
	Kind      GroupKind       `json:"kind"`
	Namespace string          `json:"namespace"`
	Name      string          `json:"name"`
	Operation string          `json:"operation"`
	DryRun    *bool           `json:"dryRun,omitempty"`
	Object    json.RawMessage `json:"object"`
}

// GroupKind is a GroupVersionKind.
type GroupKind struct {
	Group   string `json:"group"`
	Version string `json:"version"`
	Kind    string `json:"kind"`
}

// Response is an AdmissionResponse.
type Response struct {
	UID       string   `json:"uid"`
	Allowed   bool     `json:"allowed"`
	PatchType *string  `json:"patchType,omitempty"`
	Patch     []byte   `json:"patch,omitempty"` // base64 in JSON, as the API wants
	Warnings  []string `json:"warnings,omitempty"`
}

// Pod is a pod as far as the webhook reads it.
type Pod struct {
	Metadata struct {
		Name         string            `json:"name"`
		GenerateName string            `json:"generateName"`
		Namespace    string            `json:"namespace"`
		Annotations  map[string]string `json:"annotations"`
	} `json:"metadata"`
	Spec struct {
		Volumes        []Named     `json:"volumes"`
		Containers     []Container `json:"containers"`
		InitContainers []Container `json:"initContainers"`
	} `json:"spec"`
}

// Named is anything with a name (a volume).
type Named struct {
	Name string `json:"name"`
}

// Container is a container as far as the webhook reads it.
type Container struct {
	Name         string  `json:"name"`
	Env          []Env   `json:"env"`
	VolumeMounts []Mount `json:"volumeMounts"`
	Resources    struct {
		Limits   map[string]json.RawMessage `json:"limits"`
		Requests map[string]json.RawMessage `json:"requests"`
	} `json:"resources"`
}

// Env is an environment variable; ValueFrom is kept only to tell that it is
// there.
type Env struct {
	Name      string          `json:"name"`
	Value     string          `json:"value,omitempty"`
	ValueFrom json.RawMessage `json:"valueFrom,omitempty"`
}

// Mount is a volumeMount.
type Mount struct {
	Name      string `json:"name"`
	MountPath string `json:"mountPath"`
	ReadOnly  bool   `json:"readOnly,omitempty"`
}

// Volume is a hostPath volume as the webhook adds it.
type Volume struct {
	Name     string   `json:"name"`
	HostPath HostPath `json:"hostPath"`
}

// HostPath is a hostPath volume source.
type HostPath struct {
	Path string `json:"path"`
	Type string `json:"type"`
}
