//go:build k8s

package main

import (
	"context"
	"fmt"

	"github.com/fikit/fikit/k8s/pods"
	"github.com/fikit/fikit/k8s/pods/informer"
)

// With the k8s tag, `fikit serve --k8s-node` looks pods up with a client-go
// informer limited to the node.
func init() {
	startInformer = func(ctx context.Context, kubeconfig, node string) (pods.Lookup, error) {
		cfg, err := informer.Config(kubeconfig)
		if err != nil {
			return nil, fmt.Errorf("serve: --k8s-node: %w", err)
		}
		in, err := informer.Start(ctx, cfg, node)
		if err != nil {
			return nil, fmt.Errorf("serve: --k8s-node: %w", err)
		}
		return in, nil
	}
}
