// Package config_test checks that the kustomize trees build and hold what
// the docs say they do.
package config_test

import (
	"flag"
	"os"
	"slices"
	"sort"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	psapi "k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

var update = flag.Bool("update", false, "rewrite generated files")

func TestDefaultBuilds(t *testing.T) {
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	res, err := k.Run(filesys.MakeFsOnDisk(), "default")
	if err != nil {
		t.Fatalf("kustomize build config/default: %v", err)
	}
	var got []string
	for _, r := range res.Resources() {
		got = append(got, r.GetKind()+"/"+r.GetName())
	}
	sort.Strings(got)
	want := []string{
		"ClusterRole/mpijob-dashboard",
		"ClusterRole/mpijob-edit",
		"ClusterRole/mpijob-manager",
		"ClusterRole/mpijob-manager-stacks",
		"ClusterRole/mpijob-metrics-reader", "ClusterRole/mpijob-model-registration",
		"ClusterRole/mpijob-queue-view",
		"ClusterRole/mpijob-runtime-reader",
		"ClusterRole/mpijob-view",
		"ClusterRoleBinding/mpijob-dashboard",
		"ClusterRoleBinding/mpijob-manager",
		"ClusterRoleBinding/mpijob-runtime-reader",
		"ClusterTrainingRuntime/mpi-deepspeed",
		"ClusterTrainingRuntime/mpi-horovod",
		"ClusterTrainingRuntime/mpi-intel",
		"ClusterTrainingRuntime/mpi-mpich",
		"ClusterTrainingRuntime/mpi-openmpi",
		"ClusterTrainingRuntime/mpi-openmpi-gpu",
		"ClusterTrainingRuntime/mpi-openmpi5",
		"CustomResourceDefinition/jobstatuses.mpijob.dev",
		"Deployment/mpijob-dashboard",
		"Deployment/mpijob-manager",
		"MutatingWebhookConfiguration/mpijob-mutating-webhook-configuration",
		"Namespace/mpijob-system",
		"PodDisruptionBudget/mpijob-manager",
		"Role/mpijob-kubeflow-trainer-public",
		"Role/mpijob-manager-cert",
		"Role/mpijob-manager-leader-election",
		"Role/mpijob-manager-lease-reader",
		"RoleBinding/mpijob-kubeflow-trainer-public",
		"RoleBinding/mpijob-manager-cert",
		"RoleBinding/mpijob-manager-leader-election",
		"RoleBinding/mpijob-manager-lease-reader",
		"Secret/mpijob-webhook-cert",
		"Service/mpijob-dashboard",
		"Service/mpijob-metrics",
		"Service/mpijob-webhook-service",
		"ServiceAccount/mpijob-dashboard",
		"ServiceAccount/mpijob-manager",
		"ValidatingAdmissionPolicy/mpijob-manager-running.mpijob.dev",
		"ValidatingAdmissionPolicyBinding/mpijob-manager-running.mpijob.dev",
		"ValidatingWebhookConfiguration/mpijob-validating-webhook-configuration",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("config/default resources (-want,+got):\n%s", diff)
	}
}

// TestManagerDeployment checks the release's manager: Pod Security
// restricted, leader election on, its certificate's Secret mounted where
// the flag says, and webhook configurations that reach its Service, with
// no cert-manager annotation (the manager writes its own CA).
func TestManagerDeployment(t *testing.T) {
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	res, err := k.Run(filesys.MakeFsOnDisk(), "default")
	if err != nil {
		t.Fatal(err)
	}
	var dep, dash appsv1.Deployment
	hooks := 0
	for _, r := range res.Resources() {
		m, err := r.Map()
		if err != nil {
			t.Fatal(err)
		}
		switch r.GetKind() {
		case "Deployment":
			into := &dep
			if r.GetName() == "mpijob-dashboard" {
				into = &dash
			}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(m, into, true); err != nil {
				t.Fatal(err)
			}
		case "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration":
			hooks++
			if got, ok := r.GetAnnotations()["cert-manager.io/inject-ca-from"]; ok {
				t.Errorf("%s: config/default has inject-ca-from %q; only config/certmanager should", r.GetName(), got)
			}
			for _, h := range m["webhooks"].([]any) {
				svc := h.(map[string]any)["clientConfig"].(map[string]any)["service"].(map[string]any)
				if svc["name"] != "mpijob-webhook-service" || svc["namespace"] != "mpijob-system" {
					t.Errorf("%s calls service %v/%v", r.GetName(), svc["namespace"], svc["name"])
				}
			}
		}
	}
	if hooks != 2 {
		t.Errorf("want 2 webhook configurations, got %d", hooks)
	}
	eval, err := policy.NewEvaluator(policy.DefaultChecks(), nil)
	if err != nil {
		t.Fatal(err)
	}
	tpl := dep.Spec.Template
	for _, r := range eval.EvaluatePod(psapi.LevelVersion{Level: psapi.LevelRestricted, Version: psapi.LatestVersion()}, &tpl.ObjectMeta, &tpl.Spec) {
		if !r.Allowed {
			t.Errorf("mpijob-manager: Pod Security restricted: %s: %s", r.ForbiddenReason, r.ForbiddenDetail)
		}
	}
	checkNoFixedUID(t, "mpijob-manager", tpl.Spec)
	for _, r := range eval.EvaluatePod(psapi.LevelVersion{Level: psapi.LevelRestricted, Version: psapi.LatestVersion()}, &dash.Spec.Template.ObjectMeta, &dash.Spec.Template.Spec) {
		if !r.Allowed {
			t.Errorf("mpijob-dashboard: Pod Security restricted: %s: %s", r.ForbiddenReason, r.ForbiddenDetail)
		}
	}
	checkNoFixedUID(t, "mpijob-dashboard", dash.Spec.Template.Spec)
	args := strings.Join(tpl.Spec.Containers[0].Args, " ")
	for _, want := range []string{"--leader-elect", "--webhook-cert-dir=" + tpl.Spec.Containers[0].VolumeMounts[0].MountPath} {
		if !strings.Contains(args, want) {
			t.Errorf("manager args %q lack %q", args, want)
		}
	}
	if tpl.Spec.ServiceAccountName != "mpijob-manager" {
		t.Errorf("serviceAccountName = %q", tpl.Spec.ServiceAccountName)
	}
	if v := tpl.Spec.Volumes; len(v) != 1 || v[0].Secret == nil || v[0].Secret.SecretName != "mpijob-webhook-cert" {
		t.Errorf("volumes = %+v, want the Secret mpijob-webhook-cert", v)
	}
	if strings.Contains(args, "--cert-management=false") {
		t.Errorf("config/default's manager does not manage its certificate: %q", args)
	}
	if dep.Spec.Replicas == nil || *dep.Spec.Replicas != 2 {
		t.Errorf("replicas = %v, want 2", dep.Spec.Replicas)
	}
}

// TestCertManagerOverlay: config/certmanager is config/default with a
// cert-manager Certificate for both Services' names, the manager's own
// certificate management off, and cert-manager's CA injection on both
// webhook configurations.
func TestCertManagerOverlay(t *testing.T) {
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	res, err := k.Run(filesys.MakeFsOnDisk(), "certmanager")
	if err != nil {
		t.Fatalf("kustomize build config/certmanager: %v", err)
	}
	hooks, certs := 0, 0
	for _, r := range res.Resources() {
		m, err := r.Map()
		if err != nil {
			t.Fatal(err)
		}
		switch r.GetKind() {
		case "Deployment":
			if r.GetName() != "mpijob-manager" {
				continue
			}
			dep := appsv1.Deployment{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, &dep); err != nil {
				t.Fatal(err)
			}
			if args := strings.Join(dep.Spec.Template.Spec.Containers[0].Args, " "); !strings.Contains(args, "--cert-management=false") {
				t.Errorf("manager args %q lack --cert-management=false", args)
			}
		case "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration":
			hooks++
			if got := r.GetAnnotations()["cert-manager.io/inject-ca-from"]; got != "mpijob-system/mpijob-webhook-cert" {
				t.Errorf("%s: inject-ca-from = %q", r.GetName(), got)
			}
		case "Certificate":
			certs++
			spec := m["spec"].(map[string]any)
			var names []string
			for _, n := range spec["dnsNames"].([]any) {
				names = append(names, n.(string))
			}
			for _, want := range []string{"mpijob-webhook-service.mpijob-system.svc", "mpijob-metrics.mpijob-system.svc"} {
				if !slices.Contains(names, want) {
					t.Errorf("Certificate dnsNames %v lack %s", names, want)
				}
			}
			if spec["secretName"] != "mpijob-webhook-cert" {
				t.Errorf("Certificate secretName = %v", spec["secretName"])
			}
		}
	}
	if hooks != 2 || certs != 1 {
		t.Errorf("config/certmanager: %d webhook configurations and %d Certificates, want 2 and 1", hooks, certs)
	}
}

// TestOpenShiftOverlayDropsFixedFSGroup: OpenShift restricted-v2 refuses a
// fixed fsGroup; the overlay must leave none in any runtime.
func TestOpenShiftOverlayDropsFixedFSGroup(t *testing.T) {
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	res, err := k.Run(filesys.MakeFsOnDisk(), "openshift")
	if err != nil {
		t.Fatalf("kustomize build config/openshift: %v", err)
	}
	n := 0
	for _, r := range res.Resources() {
		if r.GetKind() != "ClusterTrainingRuntime" {
			continue
		}
		n++
		y, err := r.AsYAML()
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(y), "fsGroup") {
			t.Errorf("runtime %s still sets fsGroup under config/openshift", r.GetName())
		}
	}
	if n != 7 {
		t.Errorf("config/openshift has %d runtimes, want 7", n)
	}
}

// The OpenShift monitoring overlay's PrometheusRule holds exactly the
// groups of config/monitoring's rule files (the local Prometheus evaluates
// those), and its ServiceMonitor makes the scrape job "mpijob-manager", the
// name MPIJobManagerDown reads. -update rewrites the PrometheusRule.
func TestOpenShiftRulesMatch(t *testing.T) {
	var want []any
	for _, f := range []string{"monitoring/recording-rules.yaml", "monitoring/alerts.yaml"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var file struct {
			Groups []any `json:"groups"`
		}
		if err := yaml.UnmarshalStrict(b, &file); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		want = append(want, file.Groups...)
	}
	const path = "openshift-monitoring/prometheusrule.yaml"
	if *update {
		rule := map[string]any{
			"apiVersion": "monitoring.coreos.com/v1", "kind": "PrometheusRule",
			"metadata": map[string]any{"name": "mpijob", "namespace": "mpijob-system", "labels": map[string]any{"app.kubernetes.io/name": "mpijob-manager"}},
			"spec":     map[string]any{"groups": want},
		}
		b, err := yaml.Marshal(rule)
		if err != nil {
			t.Fatal(err)
		}
		header := "# GENERATED from config/monitoring/recording-rules.yaml and alerts.yaml:\n# go test ./config -run TestOpenShiftRulesMatch -update rewrites it.\n"
		if err := os.WriteFile(path, append([]byte(header), b...), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	res, err := k.Run(filesys.MakeFsOnDisk(), "openshift-monitoring")
	if err != nil {
		t.Fatalf("kustomize build config/openshift-monitoring: %v", err)
	}
	found := map[string]bool{}
	for _, r := range res.Resources() {
		found[r.GetKind()] = true
		m, err := r.Map()
		if err != nil {
			t.Fatal(err)
		}
		switch r.GetKind() {
		case "PrometheusRule":
			spec, _ := m["spec"].(map[string]any)
			if diff := cmp.Diff(want, spec["groups"]); diff != "" {
				t.Errorf("%s differs from config/monitoring's rules (go test ./config -run TestOpenShiftRulesMatch -update) (-want +got):\n%s", path, diff)
			}
		case "ServiceMonitor":
			spec, _ := m["spec"].(map[string]any)
			if spec["jobLabel"] != "app.kubernetes.io/name" {
				t.Errorf("ServiceMonitor jobLabel %v, want app.kubernetes.io/name (job=\"mpijob-manager\")", spec["jobLabel"])
			}
		}
	}
	for _, kind := range []string{"Namespace", "ServiceMonitor", "PrometheusRule", "ClusterRoleBinding", "RoleBinding"} {
		if !found[kind] {
			t.Errorf("config/openshift-monitoring has no %s", kind)
		}
	}
}

// TestOpenShiftManagerIngress: on OpenShift only the host network (the API
// server, the kubelets' probes) reaches every port of mpijob-manager, and
// OpenShift's monitoring its metrics port; no other source, a tenant's pod
// among them, is admitted. The policy must select the manager's pods and
// name ports the manager's container has.
func TestOpenShiftManagerIngress(t *testing.T) {
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	res, err := k.Run(filesys.MakeFsOnDisk(), "openshift")
	if err != nil {
		t.Fatalf("kustomize build config/openshift: %v", err)
	}
	var policies []networkingv1.NetworkPolicy
	var manager appsv1.Deployment
	for _, r := range res.Resources() {
		y, err := r.AsYAML()
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case r.GetKind() == "NetworkPolicy":
			var np networkingv1.NetworkPolicy
			if err := yaml.UnmarshalStrict(y, &np); err != nil {
				t.Fatalf("NetworkPolicy %s: %v", r.GetName(), err)
			}
			policies = append(policies, np)
		case r.GetKind() == "Deployment" && r.GetName() == "mpijob-manager":
			if err := yaml.Unmarshal(y, &manager); err != nil {
				t.Fatal(err)
			}
		}
	}
	if len(policies) != 1 {
		t.Fatalf("config/openshift has %d NetworkPolicies, want 1 (mpijob-manager-ingress)", len(policies))
	}
	np := policies[0]
	if np.Namespace != manager.Namespace {
		t.Errorf("policy in namespace %q, manager in %q", np.Namespace, manager.Namespace)
	}
	sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
	if err != nil || sel.Empty() || !sel.Matches(labels.Set(manager.Spec.Template.Labels)) {
		t.Errorf("policy's pod selector %v does not select the manager's pods %v (%v)", np.Spec.PodSelector, manager.Spec.Template.Labels, err)
	}
	if !slices.Equal(np.Spec.PolicyTypes, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}) {
		t.Errorf("policy types %v, want [Ingress]", np.Spec.PolicyTypes)
	}
	ports := map[string]bool{}
	for _, p := range manager.Spec.Template.Spec.Containers[0].Ports {
		ports[p.Name] = true
	}
	type rule struct {
		From  map[string]string
		Ports []string
	}
	var got []rule
	for _, in := range np.Spec.Ingress {
		for _, f := range in.From {
			if f.IPBlock != nil || f.PodSelector != nil || f.NamespaceSelector == nil || len(f.NamespaceSelector.MatchExpressions) > 0 || len(f.NamespaceSelector.MatchLabels) == 0 {
				t.Errorf("source %+v: want a namespace selector by labels alone (an empty one admits every tenant)", f)
				continue
			}
			r := rule{From: f.NamespaceSelector.MatchLabels}
			for _, p := range in.Ports {
				if p.Port == nil || !ports[p.Port.String()] {
					t.Errorf("port %v is not a named port of the manager's container (%v)", p.Port, ports)
					continue
				}
				r.Ports = append(r.Ports, p.Port.String())
			}
			got = append(got, r)
		}
	}
	want := []rule{
		{From: map[string]string{"policy-group.network.openshift.io/host-network": ""}},
		{From: map[string]string{"network.openshift.io/policy-group": "monitoring"}, Ports: []string{"metrics"}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ingress sources (-want +got):\n%s", diff)
	}
}
