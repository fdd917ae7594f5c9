package artifacts

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mpijob/mpijob/pkg/api"
	"github.com/mpijob/mpijob/pkg/dataconn"
	"github.com/mpijob/mpijob/pkg/podexec"
)

// ReaderLabel marks the short-lived pods that read a job's artifacts off
// a PVC; its value is the job's name.
const ReaderLabel = "mpijob.dev/artifacts-reader"

// readerLifetime bounds a reader pod that its caller never deleted (a
// killed CLI): it sleeps this long, and the kubelet ends it after it.
const readerLifetime = 10 * time.Minute

// PVCStore reads what a job wrote under MOUNT/JOB/ on a
// PersistentVolumeClaim. Nothing outside a pod can read a claim, so it
// starts a short-lived reader pod as the caller, in the job's namespace,
// with the claim mounted read-only and the image and security context of
// the job's own pods; it lists and reads files through exec, and Close
// deletes the pod. The pod is owned by the TrainJob, so deleting the job
// also removes a reader that was left behind.
type PVCStore struct {
	// Claim is the PVC; URI is pvc://CLAIM/JOB/ and Dir the folder the
	// job's pods saw (/mnt/CLAIM/JOB).
	Claim, URI, Dir string
	// Progress, when set, hears what takes time (starting the pod).
	Progress io.Writer

	c    client.Client
	cfg  *rest.Config
	cs   kubernetes.Interface
	tj   *trainer.TrainJob
	spec corev1.PodSpec // of the reader, before it starts

	// run execs a command in the reader pod (remote when nil: the pod's
	// exec subresource; tests give their own).
	run func(ctx context.Context, pod string, out io.Writer, command ...string) error

	mu   sync.Mutex
	pod  string
	objs []Object
}

// NewPVC is the store of job tj on claim p; template is the pod spec of
// the job's Launcher (or Worker), whose image and security context the
// reader borrows.
func NewPVC(c client.Client, cfg *rest.Config, tj *trainer.TrainJob, p dataconn.PVC, template *corev1.PodSpec) (*PVCStore, error) {
	if cfg == nil {
		return nil, fmt.Errorf("MPI job %s wrote its artifacts to PVC %s: reading them needs a pod, and this client cannot exec", tj.Name, p.Claim)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	// The reader mounts the claim at a folder of its own (ReaderMount),
	// not where the job's pods had it: the claim's content is the same,
	// and none of the job's files lands on a path the reader runs
	// programs from.
	mount := ReaderMount(p.Claim)
	return &PVCStore{
		Claim: p.Claim, URI: "pvc://" + p.Claim + "/" + tj.Name + "/", Dir: path.Join(mount, tj.Name),
		c: c, cfg: cfg, cs: cs, tj: tj, spec: ReaderPodSpec(template, p.Claim, mount),
	}, nil
}

// ReaderPodSpec is the pod spec of a reader of claim mounted at mount:
// template's image, security context, node selector and tolerations (the
// job's pods ran there, with these), the claim read-only, small
// resources, and a sleep that ends on its own.
func ReaderPodSpec(template *corev1.PodSpec, claim, mount string) corev1.PodSpec {
	template = template.DeepCopy()
	image := ""
	var csc *corev1.SecurityContext
	for _, ct := range template.Containers {
		if ct.Name == api.NodeContainer || image == "" {
			image, csc = ct.Image, ct.SecurityContext.DeepCopy()
		}
	}
	if csc == nil {
		csc = &corev1.SecurityContext{
			AllowPrivilegeEscalation: ptr.To(false),
			Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		}
	}
	csc.ReadOnlyRootFilesystem = ptr.To(true)
	psc := template.SecurityContext.DeepCopy()
	if psc == nil {
		psc = &corev1.PodSecurityContext{
			RunAsNonRoot:   ptr.To(true),
			SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		}
	}
	vol := dataconn.VolumeName(claim)
	return corev1.PodSpec{
		RestartPolicy:                 corev1.RestartPolicyNever,
		TerminationGracePeriodSeconds: ptr.To[int64](0),
		ActiveDeadlineSeconds:         ptr.To(int64(readerLifetime.Seconds()) + 60),
		AutomountServiceAccountToken:  ptr.To(false),
		EnableServiceLinks:            ptr.To(false),
		SecurityContext:               psc,
		NodeSelector:                  template.NodeSelector,
		Tolerations:                   template.Tolerations,
		ImagePullSecrets:              template.ImagePullSecrets,
		Containers: []corev1.Container{{
			Name: "reader", Image: image, ImagePullPolicy: corev1.PullIfNotPresent,
			Command:         []string{"sleep", strconv.Itoa(int(readerLifetime.Seconds()))},
			SecurityContext: csc,
			VolumeMounts:    []corev1.VolumeMount{{Name: vol, MountPath: mount, ReadOnly: true}},
			Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
				Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("256Mi")},
			},
		}},
		Volumes: []corev1.Volume{{Name: vol, VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim, ReadOnly: true},
		}}},
	}
}

// Location says where the artifacts are.
func (s *PVCStore) Location() Location { return Location{Claim: s.Claim, URI: s.URI} }

// start creates the reader pod and waits until it runs.
func (s *PVCStore) start(ctx context.Context) (string, error) {
	if s.pod != "" {
		return s.pod, nil
	}
	if s.Progress != nil {
		fmt.Fprintf(s.Progress, "Starting a pod that mounts PVC %s read-only to read the artifacts of MPI job %s ...\n", s.Claim, s.tj.Name)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName: s.tj.Name + "-artifacts-", Namespace: s.tj.Namespace,
			Labels: map[string]string{ReaderLabel: s.tj.Name},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: trainer.GroupVersion.String(), Kind: trainer.TrainJobKind, Name: s.tj.Name, UID: s.tj.UID,
			}},
		},
		Spec: *s.spec.DeepCopy(),
	}
	if err := s.c.Create(ctx, pod); err != nil {
		if apierrors.IsForbidden(err) {
			return "", fmt.Errorf("MPI job %s wrote its artifacts to PVC %s, and reading a claim takes a short-lived pod that mounts it read-only, which you may not create in %s: ask for a role that creates pods and pods/exec there (edit has both): %w", s.tj.Name, s.Claim, s.tj.Namespace, err)
		}
		return "", fmt.Errorf("failed to start a pod that reads PVC %s: %w", s.Claim, err)
	}
	s.pod = pod.Name
	why := ""
	err := wait.PollUntilContextTimeout(ctx, 300*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		got := &corev1.Pod{}
		if err := s.c.Get(ctx, client.ObjectKeyFromObject(pod), got); err != nil {
			return false, nil //nolint:nilerr // keep polling
		}
		switch got.Status.Phase {
		case corev1.PodRunning:
			return true, nil
		case corev1.PodFailed, corev1.PodSucceeded:
			return false, fmt.Errorf("reader pod %s ended: %s %s", got.Name, got.Status.Reason, got.Status.Message)
		}
		why = pendingReason(got)
		return false, nil
	})
	switch {
	case err == nil:
	case wait.Interrupted(err) && ctx.Err() == nil:
		if why == "" {
			why = err.Error()
		}
		return "", fmt.Errorf("the pod %s that reads PVC %s did not start within 2m: %s", pod.Name, s.Claim, why)
	default:
		// It ended, or the caller gave up.
		return "", fmt.Errorf("the pod %s that reads PVC %s did not start: %w", pod.Name, s.Claim, err)
	}
	return s.pod, nil
}

// pendingReason says why a pod has not started yet.
func pendingReason(p *corev1.Pod) string {
	for _, cs := range p.Status.ContainerStatuses {
		if w := cs.State.Waiting; w != nil && w.Reason != "" && w.Reason != "ContainerCreating" {
			return strings.TrimSpace(w.Reason + ": " + w.Message)
		}
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
			return strings.TrimSpace(c.Reason + ": " + c.Message)
		}
	}
	return "Pending"
}

// exec runs command in the reader pod, streaming its stdout to out.
func (s *PVCStore) exec(ctx context.Context, out io.Writer, command ...string) error {
	pod, err := s.start(ctx)
	if err != nil {
		return err
	}
	if s.run != nil {
		return s.run(ctx, pod, out, command...)
	}
	return s.remote(ctx, pod, out, command...)
}

// remote runs command in pod's reader container (podexec.Run).
func (s *PVCStore) remote(ctx context.Context, pod string, out io.Writer, command ...string) error {
	err := podexec.Run(ctx, s.cfg, s.cs, s.tj.Namespace, pod, "reader", command, out)
	if apierrors.IsForbidden(err) {
		return fmt.Errorf("you may not exec into pods in %s, which reading PVC %s takes: ask for a role with pods/exec there: %w", s.tj.Namespace, s.Claim, err)
	}
	return err
}

// List lists the files under the job's folder, by name.
func (s *PVCStore) List(ctx context.Context) ([]Object, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.list(ctx)
}

func (s *PVCStore) list(ctx context.Context) ([]Object, error) {
	var out bytes.Buffer
	// No folder yet is no artifacts yet, not an error.
	if err := s.exec(ctx, &out, "/bin/sh", "-c", ListScript, "list", s.Dir); err != nil {
		return nil, fmt.Errorf("failed to list %s on PVC %s: %w", s.Dir, s.Claim, err)
	}
	objs, err := parseFind(out.String())
	if err != nil {
		return nil, fmt.Errorf("failed to list %s on PVC %s: %w", s.Dir, s.Claim, err)
	}
	objs = slices.DeleteFunc(objs, func(o Object) bool { return IsCheckpoint(o.Name) })
	s.objs = objs
	return objs, nil
}

// ListScript lists the files under the folder $1 as find's "SIZE MTIME
// PATH\0" records. Its programs come from the image's own folders, by a
// fixed PATH: nothing the job wrote can stand in for them (the claim is
// mounted under ReaderMountRoot). The SDK runs the same script.
const ListScript = `PATH=/usr/bin:/bin; export PATH; [ -d "$1" ] || exit 0; cd "$1" && find . -type f -printf '%s %T@ %P\0'`

// parseFind reads find's "SIZE MTIME PATH\0" records.
func parseFind(out string) ([]Object, error) {
	var objs []Object
	for _, rec := range strings.Split(out, "\x00") {
		if rec == "" {
			continue
		}
		f := strings.SplitN(rec, " ", 3)
		if len(f) != 3 {
			return nil, fmt.Errorf("unexpected listing line %q", rec)
		}
		size, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("unexpected size in %q", rec)
		}
		secs, err := strconv.ParseFloat(f[1], 64)
		if err != nil {
			return nil, fmt.Errorf("unexpected time in %q", rec)
		}
		whole := int64(secs)
		objs = append(objs, Object{Name: f[2], Size: size, LastModified: time.Unix(whole, int64((secs-float64(whole))*1e9)).UTC()})
	}
	sort.Slice(objs, func(i, j int) bool { return objs[i].Name < objs[j].Name })
	return objs, nil
}

// Open reads one artifact by name, as List shows it.
func (s *PVCStore) Open(ctx context.Context, name string) (io.ReadCloser, int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.objs == nil {
		if _, err := s.list(ctx); err != nil {
			return nil, 0, err
		}
	}
	var size int64 = -1
	for _, o := range s.objs {
		if o.Name == name {
			size = o.Size
		}
	}
	if size < 0 {
		return nil, 0, fmt.Errorf("artifact %q is not in %s: list them with kubectl mpijob artifacts", name, s.URI)
	}
	pr, pw := io.Pipe()
	file := path.Join(s.Dir, name)
	go func() {
		pw.CloseWithError(s.exec(ctx, pw, "/bin/cat", "--", file))
	}()
	return pr, size, nil
}

// Close deletes the reader pod, if one started.
func (s *PVCStore) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pod == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := s.c.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: s.tj.Namespace, Name: s.pod}}, client.GracePeriodSeconds(0))
	s.pod = ""
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("failed to delete reader pod: %w", err)
	}
	return nil
}
