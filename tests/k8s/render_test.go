package k8s

import (
	"slices"
	"strings"
	"testing"

	admv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
)

func find[T any](t *testing.T, ms []Manifest) []T {
	t.Helper()
	var out []T
	for _, m := range ms {
		if o, ok := m.Object.(T); ok {
			out = append(out, o)
		}
	}
	return out
}

// TestChartRenders: the chart renders with its defaults, every object
// strict-decodes, and what docs/kubernetes.md and docs/security.md promise
// of it holds.
func TestChartRenders(t *testing.T) {
	ms, err := Render("fikit", "fikit-system", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	for _, m := range ms {
		kinds[m.Kind]++
	}
	for k, n := range map[string]int{"DaemonSet": 1, "Deployment": 1, "Service": 1, "MutatingWebhookConfiguration": 1,
		"ClusterRole": 1, "ClusterRoleBinding": 1, "ServiceAccount": 2, "Secret": 1, "ConfigMap": 1} {
		if kinds[k] != n {
			t.Errorf("%d %s, want %d (all: %v)", kinds[k], k, n, kinds)
		}
	}
	ds := find[*appsv1.DaemonSet](t, ms)[0]
	if !ds.Spec.Template.Spec.HostPID || !ds.Spec.Template.Spec.HostNetwork {
		t.Error("daemon without hostPID (its senders' cgroups) or hostNetwork (host services on 127.0.0.1)")
	}
	args := strings.Join(ds.Spec.Template.Spec.Containers[0].Args, " ")
	for _, w := range []string{"--listen=unix:/run/fikit/sock/hooks.sock", "--k8s-node=$(NODE_NAME)", "--priority-policy=/etc/fikit/policy"} {
		if !strings.Contains(args, w) {
			t.Errorf("daemon args %q lack %s", args, w)
		}
	}
	if ic := ds.Spec.Template.Spec.InitContainers; len(ic) != 1 || ic[0].Args[0] != "install-hook" {
		t.Errorf("init containers %v", ic)
	}
	// Least privilege: the daemon reads pods, nothing else.
	cr := find[*rbacv1.ClusterRole](t, ms)[0]
	if len(cr.Rules) != 1 || !slices.Equal(cr.Rules[0].Resources, []string{"pods"}) ||
		!slices.Equal(cr.Rules[0].Verbs, []string{"get", "list", "watch"}) {
		t.Errorf("daemon's role %+v", cr.Rules)
	}
	dep := find[*appsv1.Deployment](t, ms)[0]
	ps := dep.Spec.Template.Spec
	if ps.HostPID || ps.SecurityContext == nil || ps.SecurityContext.RunAsNonRoot == nil || !*ps.SecurityContext.RunAsNonRoot ||
		ps.AutomountServiceAccountToken == nil || *ps.AutomountServiceAccountToken {
		t.Errorf("webhook pod not least privilege: %+v", ps)
	}
	for _, v := range ps.Volumes {
		if v.HostPath != nil {
			t.Errorf("webhook mounts the host: %v", v)
		}
	}
	mw := find[*admv1.MutatingWebhookConfiguration](t, ms)[0]
	w := mw.Webhooks[0]
	if *w.FailurePolicy != admv1.Ignore || *w.ReinvocationPolicy != admv1.IfNeededReinvocationPolicy ||
		w.NamespaceSelector.MatchLabels["fikit.io/inject"] != "enabled" || len(w.ClientConfig.CABundle) == 0 ||
		w.ClientConfig.Service == nil || *w.ClientConfig.Service.Path != "/mutate" || *w.SideEffects != admv1.SideEffectClassNone {
		t.Errorf("webhook configuration %+v", w)
	}
	sec := find[*corev1.Secret](t, ms)[0]
	if sec.Type != corev1.SecretTypeTLS || len(sec.Data["tls.crt"]) == 0 || string(sec.Data["ca.crt"]) != string(w.ClientConfig.CABundle) {
		t.Errorf("TLS secret %s %d bytes, CA bundle matches: %v", sec.Type, len(sec.Data["tls.crt"]), string(sec.Data["ca.crt"]) == string(w.ClientConfig.CABundle))
	}
	// /var/lib/fikit (profiles, the board) is the daemon's alone.
	for _, m := range ms {
		if m.Kind != "DaemonSet" && strings.Contains(m.YAML, "/var/lib/fikit") {
			t.Errorf("%s %s names the data directory", m.Kind, m.Name)
		}
	}
}

// TestChartCertManager: with cert-manager the chart makes a Certificate
// (and a self-signed Issuer) and no Secret of its own.
func TestChartCertManager(t *testing.T) {
	ms, err := Render("fikit", "fikit-system", map[string]any{"webhook": map[string]any{"tls": map[string]any{
		"certManager": map[string]any{"enabled": true}}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, m := range ms {
		kinds = append(kinds, m.Kind)
	}
	if !slices.Contains(kinds, "Certificate") || !slices.Contains(kinds, "Issuer") || slices.Contains(kinds, "Secret") {
		t.Errorf("kinds %v", kinds)
	}
	mw := find[*admv1.MutatingWebhookConfiguration](t, ms)[0]
	if mw.Annotations["cert-manager.io/inject-ca-from"] != "fikit-system/fikit-webhook" {
		t.Errorf("annotations %v", mw.Annotations)
	}
}
