// Package doctor checks a cluster for what mpijob needs: the engine's
// versions and whether they work together, mpijob's admission, its
// manager's leader, the log API, the runtimes' images on the nodes and the
// certificates. `kubectl mpijob doctor` and the dashboard's Cluster page
// run the same checks, each as its user: what a user may not read is
// skipped, not failed.
package doctor

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/client-go/discovery"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mpijob/mpijob/pkg/api"
	"github.com/mpijob/mpijob/pkg/runtimes"
)

// Severities of a doctor's finding, in rising order.
const (
	SeverityOK      = "ok"
	SeverityInfo    = "info"
	SeverityWarning = "warning"
	SeverityError   = "error"
)

// Finding is one check of `kubectl mpijob doctor`.
type Finding struct {
	Check    string `json:"check"`
	Severity string `json:"severity"`
	Message  string `json:"message"`
	// Fix is what to do ("" when nothing).
	Fix string `json:"fix,omitempty"`
}

// Env is what the checks read with: the user's own clients, in the
// namespace where the admission probe's dry run goes.
type Env struct {
	Client    client.Client
	Discovery discovery.DiscoveryInterface
	Namespace string
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

func (e Env) now() time.Time {
	if e.Now == nil {
		return time.Now()
	}
	return e.Now()
}

// Run makes every check and returns the findings, in a fixed order.
func Run(ctx context.Context, e Env) []Finding {
	var fs []Finding
	add := func(f ...Finding) { fs = append(fs, f...) }
	add(e.kubernetes())
	vers, vf := e.engine(ctx)
	add(vf...)
	add(EnginePair(vers["trainer"], vers["kueue"]))
	add(e.admission(ctx))
	add(e.leader(ctx))
	add(e.logStore())
	add(e.images(ctx)...)
	add(e.certificates(ctx)...)
	return fs
}

// Worst is the highest severity of fs (ok for none).
func Worst(fs []Finding) string {
	rank := map[string]int{SeverityOK: 0, SeverityInfo: 0, SeverityWarning: 1, SeverityError: 2}
	w := SeverityOK
	for _, f := range fs {
		if rank[f.Severity] > rank[w] {
			w = f.Severity
		}
	}
	return w
}

func skipped(check, what string) Finding {
	return Finding{Check: check, Severity: SeverityInfo, Message: "skipped: you may not read " + what + " (an administrator's doctor checks it)"}
}

func (e Env) kubernetes() Finding {
	v, err := e.Discovery.ServerVersion()
	if err != nil {
		return Finding{Check: "kubernetes", Severity: SeverityError, Message: "the API server did not say its version: " + err.Error(), Fix: "check the kubeconfig's server and that the cluster runs"}
	}
	return Finding{Check: "kubernetes", Severity: SeverityOK, Message: "Kubernetes " + v.GitVersion}
}

// engineCRDs are the CRD each engine part is read from.
var engineCRDs = []struct{ part, crd, group, version string }{
	{"trainer", "trainjobs.trainer.kubeflow.org", "trainer.kubeflow.org", "v1alpha1"},
	{"jobset", "jobsets.jobset.x-k8s.io", "jobset.x-k8s.io", "v1alpha2"},
	{"kueue", "workloads.kueue.x-k8s.io", "kueue.x-k8s.io", "v1beta2"},
}

// engine finds Trainer, JobSet and Kueue: their API served, and their
// CRD's version label and stored versions where the user may read CRDs.
func (e Env) engine(ctx context.Context) (map[string]string, []Finding) {
	vers := map[string]string{}
	var out []Finding
	for _, part := range engineCRDs {
		check := part.part
		if _, err := e.Discovery.ServerResourcesForGroupVersion(part.group + "/" + part.version); err != nil {
			sev, fix := SeverityError, "install "+part.part+" (docs/install.md)"
			if part.part == "kueue" {
				sev, fix = SeverityWarning, "install Kueue for queues, quotas and priorities; without it jobs start as soon as they are created"
			}
			out = append(out, Finding{Check: check, Severity: sev, Message: fmt.Sprintf("API %s/%s is not served: %v", part.group, part.version, err), Fix: fix})
			continue
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		err := e.Client.Get(ctx, client.ObjectKey{Name: part.crd}, crd)
		switch {
		case apierrors.IsForbidden(err):
			out = append(out, Finding{Check: check, Severity: SeverityOK, Message: fmt.Sprintf("API %s/%s served (its version: you may not read CRDs)", part.group, part.version)})
			continue
		case err != nil:
			out = append(out, Finding{Check: check, Severity: SeverityError, Message: "CRD " + part.crd + ": " + err.Error()})
			continue
		}
		v := crd.Labels["app.kubernetes.io/version"]
		vers[part.part] = v
		stored := strings.Join(crd.Status.StoredVersions, ",")
		msg := fmt.Sprintf("%s %s; CRD %s stores %s", part.part, orDash(v), part.crd, orDash(stored))
		f := Finding{Check: check, Severity: SeverityOK, Message: msg}
		if len(crd.Status.StoredVersions) > 1 {
			f.Severity = SeverityWarning
			f.Fix = "objects are stored in more than one version: migrate them to the served version, then drop the old one from status.storedVersions"
		}
		if v == "" {
			f.Message += " (version unknown: the CRD has no app.kubernetes.io/version label)"
		}
		out = append(out, f)
	}
	return vers, out
}

// EnginePair says whether a Trainer and a Kueue work together ("" for
// either: unknown). Kueue's TrainJob integration is compiled against one
// Trainer API: Kueue v0.19 against Trainer v2.2's; it moved to Trainer
// v2.3.0's API in kubernetes-sigs/kueue#14504, after v0.19.
func EnginePair(trainerV, kueueV string) Finding {
	const check = "trainer+kueue"
	if trainerV == "" || kueueV == "" {
		return Finding{Check: check, Severity: SeverityInfo, Message: "not judged: a version is unknown"}
	}
	t, err1 := version.ParseGeneric(trainerV)
	k, err2 := version.ParseGeneric(kueueV)
	if err1 != nil || err2 != nil {
		return Finding{Check: check, Severity: SeverityInfo, Message: fmt.Sprintf("not judged: Trainer %q or Kueue %q is not a version", trainerV, kueueV)}
	}
	if t.AtLeast(version.MustParseGeneric("2.3.0")) && k.LessThan(version.MustParseGeneric("0.20.0")) {
		return Finding{Check: check, Severity: SeverityWarning,
			Message: fmt.Sprintf("Kueue %s is built against Trainer v2.2's API, and this cluster runs Trainer %s, whose TrainJob API changed: Kueue may read TrainJobs wrongly without an error (kubernetes-sigs/kueue#14504 moved Kueue to Trainer v2.3.0's API after v0.19)", kueueV, trainerV),
			Fix:     "upgrade Kueue to a release that includes kubernetes-sigs/kueue#14504, or run Trainer v2.2; mpijob's tests run this pair on the local cluster (queueing, preemption, quotas), and those work"}
	}
	return Finding{Check: check, Severity: SeverityOK, Message: fmt.Sprintf("Trainer %s and Kueue %s are built for the same TrainJob API", trainerV, kueueV)}
}

// admission times a server dry run of a one-Worker job through every
// webhook, mpijob's among them.
func (e Env) admission(ctx context.Context) Finding {
	const check = "admission"
	tj := &trainer.TrainJob{
		ObjectMeta: metav1.ObjectMeta{Name: "doctor-" + utilrand.String(5), Namespace: e.Namespace},
		Spec: trainer.TrainJobSpec{RuntimeRef: trainer.RuntimeRef{Name: "mpi-openmpi", APIGroup: ptr.To(trainer.GroupVersion.Group), Kind: ptr.To(trainer.ClusterTrainingRuntimeKind)},
			Trainer: &trainer.Trainer{NumNodes: ptr.To[int32](1)}},
	}
	start := time.Now()
	err := e.Client.Create(ctx, tj, client.DryRunAll)
	took := time.Since(start)
	switch {
	case err == nil:
		f := Finding{Check: check, Severity: SeverityOK, Message: fmt.Sprintf("a server dry run of a 1-Worker job on mpi-openmpi in %s passed every webhook in %s", e.Namespace, took.Round(time.Millisecond))}
		if took > 2*time.Second {
			f.Severity, f.Fix = SeverityWarning, "admission is slow: check mpijob-manager's CPU (kubectl -n mpijob-system top pods) and the API server's load"
		}
		return f
	case apierrors.IsForbidden(err) && !strings.Contains(err.Error(), "webhook"):
		return skipped(check, "create TrainJobs in "+e.Namespace)
	case strings.Contains(err.Error(), "mpijob-manager is not running"):
		// The policy mpijob-manager-running.mpijob.dev: no ready replica
		// behind the webhook Service.
		return Finding{Check: check, Severity: SeverityError, Message: "no mpijob-manager replica is ready to admit MPI jobs: " + err.Error(),
			Fix: "no MPI job can be created until one is: kubectl -n mpijob-system get deployment/mpijob-manager pods, and read the pods' logs and events"}
	case strings.Contains(err.Error(), "failed calling webhook") || strings.Contains(err.Error(), "no mpijob-manager"):
		return Finding{Check: check, Severity: SeverityError, Message: "a webhook did not answer: " + err.Error(),
			Fix: "no MPI job can be created: check the webhook's pods (kubectl -n mpijob-system get pods) and Service endpoints"}
	case apierrors.IsNotFound(err) || strings.Contains(err.Error(), "mpi-openmpi"):
		return Finding{Check: check, Severity: SeverityWarning, Message: "the probe job on runtime mpi-openmpi was refused: " + err.Error(),
			Fix: "install the shipped runtimes (config/runtimes), or ignore this where mpi-openmpi is left out on purpose"}
	}
	return Finding{Check: check, Severity: SeverityWarning, Message: fmt.Sprintf("the probe job was refused in %s: %v", took.Round(time.Millisecond), err),
		Fix: "read the refusal: a quota or policy of namespace " + e.Namespace + " may refuse any job"}
}

// leader reads the manager's leader election Lease.
func (e Env) leader(ctx context.Context) Finding {
	const check = "manager"
	l := &coordinationv1.Lease{}
	err := e.Client.Get(ctx, client.ObjectKey{Namespace: "mpijob-system", Name: api.ManagerLeaseName}, l)
	switch {
	case apierrors.IsForbidden(err):
		return skipped(check, "Leases in mpijob-system")
	case apierrors.IsNotFound(err):
		return Finding{Check: check, Severity: SeverityError, Message: "no leader Lease " + api.ManagerLeaseName + " in mpijob-system: mpijob-manager never ran here",
			Fix: "install mpijob (kubectl apply -k config/default) and check its pods"}
	case err != nil:
		return Finding{Check: check, Severity: SeverityError, Message: "the leader Lease: " + err.Error()}
	}
	return LeaderFinding(l, e.now())
}

// LeaderFinding judges the manager's Lease: a leader that renewed within
// its lease duration leads; one that did not has stopped.
func LeaderFinding(l *coordinationv1.Lease, now time.Time) Finding {
	const check = "manager"
	holder := ptr.Deref(l.Spec.HolderIdentity, "")
	if holder == "" || l.Spec.RenewTime == nil {
		return Finding{Check: check, Severity: SeverityError, Message: "no mpijob-manager replica leads: diagnosis, progress and NetworkPolicies stop",
			Fix: "kubectl -n mpijob-system get pods; read the manager's log (kubectl -n mpijob-system logs deploy/mpijob-manager)"}
	}
	pod, _, _ := strings.Cut(holder, "_")
	since := now.Sub(l.Spec.RenewTime.Time)
	leaseFor := time.Duration(ptr.Deref(l.Spec.LeaseDurationSeconds, 15)) * time.Second
	age := "-"
	if l.Spec.AcquireTime != nil {
		age = duration.HumanDuration(now.Sub(l.Spec.AcquireTime.Time))
	}
	if since > leaseFor {
		return Finding{Check: check, Severity: SeverityError,
			Message: fmt.Sprintf("the leader %s last renewed its lease %s ago (it lasts %s): no replica leads now", pod, since.Round(time.Second), leaseFor),
			Fix:     "kubectl -n mpijob-system get pods; a replica that cannot reach the API server cannot lead"}
	}
	return Finding{Check: check, Severity: SeverityOK, Message: fmt.Sprintf("leader %s for %s, renewed %s ago", pod, age, since.Round(time.Second))}
}

// logStore asks for the log API's resources, which its APIService serves
// only while mpijob-manager's log API answers.
func (e Env) logStore() Finding {
	const check = "log store"
	if _, err := e.Discovery.ServerResourcesForGroupVersion("logs.mpijob.dev/v1alpha1"); err != nil {
		return Finding{Check: check, Severity: SeverityError, Message: "the log API (logs.mpijob.dev/v1alpha1) does not answer: " + err.Error(),
			Fix: "logs of finished jobs cannot be read: kubectl get apiservice v1alpha1.logs.mpijob.dev, and mpijob-manager's pods"}
	}
	return Finding{Check: check, Severity: SeverityOK, Message: "the log API (logs.mpijob.dev/v1alpha1) answers"}
}

// images checks that every MPI runtime's images are on at least one node.
func (e Env) images(ctx context.Context) []Finding {
	const check = "images"
	rts := &trainer.ClusterTrainingRuntimeList{}
	if err := e.Client.List(ctx, rts); err != nil {
		return []Finding{{Check: check, Severity: SeverityError, Message: "the runtimes: " + err.Error()}}
	}
	nodes := &corev1.NodeList{}
	if err := e.Client.List(ctx, nodes); apierrors.IsForbidden(err) {
		return []Finding{skipped(check, "nodes")}
	} else if err != nil {
		return []Finding{{Check: check, Severity: SeverityError, Message: "the nodes: " + err.Error()}}
	}
	want := map[string][]string{}
	for i := range rts.Items {
		rt := &rts.Items[i]
		if !runtimes.IsMPI(&rt.Spec) {
			continue
		}
		for _, rj := range rt.Spec.Template.Spec.ReplicatedJobs {
			pod := rj.Template.Spec.Template.Spec
			for _, c := range append(append([]corev1.Container{}, pod.InitContainers...), pod.Containers...) {
				if !slices.Contains(want[c.Image], rt.Name) {
					want[c.Image] = append(want[c.Image], rt.Name)
				}
			}
		}
	}
	return ImageFindings(want, nodes.Items)
}

// ImageFindings says which runtimes' images (image → runtimes) no node
// holds: their first job pulls them, or cannot.
func ImageFindings(want map[string][]string, nodes []corev1.Node) []Finding {
	const check = "images"
	have := map[string]bool{}
	for _, n := range nodes {
		for _, img := range n.Status.Images {
			for _, name := range img.Names {
				have[name] = true
				if base, _, ok := strings.Cut(name, "@"); ok {
					have[base] = true
				}
			}
		}
	}
	present := func(image string) bool {
		if have[image] {
			return true
		}
		// Nodes list images with their registry host (docker.io/library/x).
		for _, alt := range []string{"docker.io/" + image, "docker.io/library/" + image} {
			if have[alt] {
				return true
			}
		}
		return false
	}
	var missing []string
	for img := range want {
		if !present(img) {
			missing = append(missing, img)
		}
	}
	sort.Strings(missing)
	if len(missing) == 0 {
		return []Finding{{Check: check, Severity: SeverityOK, Message: fmt.Sprintf("every runtime's %d images are on at least one node", len(want))}}
	}
	var out []Finding
	for _, img := range missing {
		out = append(out, Finding{Check: check, Severity: SeverityWarning,
			Message: fmt.Sprintf("image %s of runtime %s is on no node: the first job pulls it (slowly), or fails with ImagePullFailed if the registry cannot be reached", img, strings.Join(want[img], ", ")),
			Fix:     "pre-pull it on the nodes, or push it to a registry the nodes reach (make images REGISTRY=...)"})
	}
	return out
}

// certificates checks the CA bundles of mpijob's webhooks and log API.
func (e Env) certificates(ctx context.Context) []Finding {
	const check = "certificates"
	bundles := map[string][]byte{}
	vw := &admissionregistrationv1.ValidatingWebhookConfigurationList{}
	if err := e.Client.List(ctx, vw); apierrors.IsForbidden(err) {
		return []Finding{skipped(check, "webhook configurations")}
	} else if err != nil {
		return []Finding{{Check: check, Severity: SeverityError, Message: err.Error()}}
	}
	for _, c := range vw.Items {
		if !strings.HasPrefix(c.Name, "mpijob-") {
			continue
		}
		for _, w := range c.Webhooks {
			bundles["webhook "+c.Name] = w.ClientConfig.CABundle
		}
	}
	return CertFindings(bundles, e.now())
}

// CertFindings judges PEM bundles (where → bundle): a certificate that
// expires within 30 days is a warning, one expired an error.
func CertFindings(bundles map[string][]byte, now time.Time) []Finding {
	const check = "certificates"
	var out []Finding
	for _, where := range slices.Sorted(maps.Keys(bundles)) {
		rest := bundles[where]
		found := false
		for {
			var b *pem.Block
			b, rest = pem.Decode(rest)
			if b == nil {
				break
			}
			c, err := x509.ParseCertificate(b.Bytes)
			if err != nil {
				continue
			}
			found = true
			left := c.NotAfter.Sub(now)
			switch {
			case left <= 0:
				out = append(out, Finding{Check: check, Severity: SeverityError, Message: fmt.Sprintf("%s: certificate %q expired on %s", where, c.Subject.CommonName, c.NotAfter.UTC().Format(time.DateOnly)),
					Fix: "restart mpijob-manager, whose cert-controller issues a new one (or renew it with cert-manager)"})
			case left < 30*24*time.Hour:
				out = append(out, Finding{Check: check, Severity: SeverityWarning, Message: fmt.Sprintf("%s: certificate %q expires in %s (%s)", where, c.Subject.CommonName, duration.HumanDuration(left), c.NotAfter.UTC().Format(time.DateOnly)),
					Fix: "let mpijob-manager's cert-controller rotate it (it runs), or renew it with cert-manager"})
			default:
				out = append(out, Finding{Check: check, Severity: SeverityOK, Message: fmt.Sprintf("%s: certificate %q valid until %s", where, c.Subject.CommonName, c.NotAfter.UTC().Format(time.DateOnly))})
			}
		}
		if !found {
			out = append(out, Finding{Check: check, Severity: SeverityError, Message: where + ": no CA certificate (caBundle empty)",
				Fix: "the API server cannot trust mpijob's webhook: check that mpijob-manager's cert-controller runs"})
		}
	}
	if len(out) == 0 {
		out = append(out, Finding{Check: check, Severity: SeverityError, Message: "no mpijob webhook configuration: mpijob's admission is not installed", Fix: "kubectl apply -k config/default"})
	}
	return out
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
