//go:build k8s

package k8s

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/yaml"
)

// Apply applies manifests server-side (as `kubectl apply --server-side`):
// the API server validates each object in full, with its field manager.
func Apply(ctx context.Context, cfg *rest.Config, namespace string, ms []Manifest) error {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return err
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	for _, m := range ms {
		var obj unstructured.Unstructured
		if err := yaml.Unmarshal([]byte(m.YAML), &obj.Object); err != nil {
			return fmt.Errorf("%s: %w", m.Source, err)
		}
		gvk := obj.GroupVersionKind()
		mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			return fmt.Errorf("%s %s: %w", m.Kind, m.Name, err)
		}
		body, err := obj.MarshalJSON()
		if err != nil {
			return err
		}
		ri := dyn.Resource(mapping.Resource)
		var r dynamic.ResourceInterface = ri
		if mapping.Scope.Name() == "namespace" {
			ns := obj.GetNamespace()
			if ns == "" {
				ns = namespace
			}
			r = ri.Namespace(ns)
		}
		force := true
		if _, err := r.Patch(ctx, obj.GetName(), types.ApplyPatchType, body,
			metav1.PatchOptions{FieldManager: "fikit-test", Force: &force, FieldValidation: "Strict"}); err != nil {
			return fmt.Errorf("apply %s %s: %w", m.Kind, m.Name, err)
		}
	}
	return nil
}
