//go:build k8s

package informer

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/fikit/fikit/k8s/pods"
)

// ErrNoNode is an informer asked for without a node name.
var ErrNoNode = errors.New("pod informer: no node name (set --k8s-node or NODE_NAME)")

// Informer is a pods.Lookup over the pods of one node.
type Informer struct {
	mu      sync.RWMutex
	pods    map[string]pods.Pod
	learned chan struct{}
	synced  cache.InformerSynced
}

// Config is the client configuration: from kubeconfig where it is given,
// else in-cluster (the pod's service account).
func Config(kubeconfig string) (*rest.Config, error) {
	var cfg *rest.Config
	var err error
	if kubeconfig != "" {
		cfg, err = clientcmd.BuildConfigFromFlags("", kubeconfig)
	} else {
		cfg, err = rest.InClusterConfig()
	}
	if err != nil {
		return nil, fmt.Errorf("pod informer: %w", err)
	}
	cfg.UserAgent = "fikit-daemon"
	return cfg, nil
}

// Start lists and watches the pods of node until ctx ends; it returns at
// once (Synced says when the first list is in).
func Start(ctx context.Context, cfg *rest.Config, node string) (*Informer, error) {
	if node == "" {
		return nil, ErrNoNode
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("pod informer: %w", err)
	}
	lw := cache.NewListWatchFromClient(cs.CoreV1().RESTClient(), "pods", metav1.NamespaceAll,
		fields.OneTermEqualSelector("spec.nodeName", node))
	inf := cache.NewSharedIndexInformer(lw, &corev1.Pod{}, 10*time.Minute, cache.Indexers{})
	// Keep only what the daemon reads: a node's pods' specs and statuses
	// are most of an informer's memory.
	if err := inf.SetTransform(strip); err != nil {
		return nil, fmt.Errorf("pod informer: %w", err)
	}
	in := &Informer{pods: map[string]pods.Pod{}, learned: make(chan struct{}, 1)}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    in.set,
		UpdateFunc: func(_, o any) { in.set(o) },
		DeleteFunc: in.del,
	}); err != nil {
		return nil, fmt.Errorf("pod informer: %w", err)
	}
	in.synced = inf.HasSynced
	go inf.Run(ctx.Done())
	return in, nil
}

// Synced reports whether the first list has been read.
func (in *Informer) Synced() bool { return in.synced() }

// Pod implements pods.Lookup.
func (in *Informer) Pod(uid string) (pods.Pod, bool) {
	in.mu.RLock()
	defer in.mu.RUnlock()
	p, ok := in.pods[uid]
	return p, ok
}

// List implements pods.Lookup.
func (in *Informer) List() []pods.Pod {
	in.mu.RLock()
	defer in.mu.RUnlock()
	out := make([]pods.Pod, 0, len(in.pods))
	for _, p := range in.pods {
		out = append(out, p)
	}
	return out
}

// Learned implements pods.Lookup.
func (in *Informer) Learned() <-chan struct{} { return in.learned }

func (in *Informer) set(o any) {
	p, ok := o.(*corev1.Pod)
	if !ok {
		return
	}
	in.mu.Lock()
	in.pods[string(p.UID)] = toPod(p)
	in.mu.Unlock()
	pods.Signal(in.learned)
}

func (in *Informer) del(o any) {
	if t, ok := o.(cache.DeletedFinalStateUnknown); ok {
		o = t.Obj
	}
	p, ok := o.(*corev1.Pod)
	if !ok {
		return
	}
	in.mu.Lock()
	delete(in.pods, string(p.UID))
	in.mu.Unlock()
}

func toPod(p *corev1.Pod) pods.Pod {
	sa := p.Spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	pod := pods.Pod{UID: string(p.UID), Namespace: p.Namespace, Name: p.Name, ServiceAccount: sa,
		Node: p.Spec.NodeName, Annotations: p.Annotations, Running: p.Status.Phase == corev1.PodRunning}
	if p.Status.StartTime != nil {
		pod.RunningSince = p.Status.StartTime.Time
	}
	return pod
}

// strip keeps of a pod what toPod reads.
func strip(o any) (any, error) {
	p, ok := o.(*corev1.Pod)
	if !ok {
		return o, nil
	}
	return &corev1.Pod{
		TypeMeta: p.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace, UID: p.UID,
			ResourceVersion: p.ResourceVersion, Annotations: p.Annotations},
		Spec:   corev1.PodSpec{NodeName: p.Spec.NodeName, ServiceAccountName: p.Spec.ServiceAccountName},
		Status: corev1.PodStatus{Phase: p.Status.Phase, StartTime: p.Status.StartTime},
	}, nil
}

var _ pods.Lookup = (*Informer)(nil)
