package diagnose

import (
	"encoding/json"
	"fmt"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"github.com/mpijob/mpijob/pkg/api"
)

// diagnoseBoth diagnoses in as it is and as the manager's cache keeps it
// (TrimJobSet, TrimJobSetPod), and fails when the two differ: every
// diagnosis test is also a test that the cache's transforms keep what the
// diagnosis reads. It fails too when Diagnose changes its input: the
// manager hands it the cache's own pods (client.UnsafeDisableDeepCopy).
func diagnoseBoth(t *testing.T, in Input) api.Status {
	t.Helper()
	var got, fromTrimmed api.Status
	leavesInput(t, "Diagnose", in, func() { got = Diagnose(in) })
	// decide records the pods and their failures besides the diagnosis.
	leavesInput(t, "decide", in, func() { Decide(in.TrainJob, Known{}, in) })
	tin := trimmed(t, in)
	leavesInput(t, "Diagnose of the trimmed input", tin, func() { fromTrimmed = Diagnose(tin) })
	if diff := cmp.Diff(got, fromTrimmed); diff != "" {
		t.Errorf("the diagnosis changes when the cache trims the JobSet and pods (-full,+trimmed):\n%s", diff)
	}
	// A finding's subject is the pod its message names: a rule that names
	// a Worker or the Launcher and leaves the subject out would list the
	// wrong pod as failed in every interface.
	if want := subjectNamedIn(got.Message); got.Reason != "" && !cmp.Equal(want, got.Subject) {
		t.Errorf("%s: subject %+v, but the message names %+v: %s", got.Reason, got.Subject, want, got.Message)
	}
	checkSteps(t, in.TrainJob.Name, got)
	return got
}

// mpijobCommand is a kubectl mpijob command in a step's words (tests only).
var mpijobCommand = regexp.MustCompile(`kubectl mpijob (logs|clone|describe|events|delete|runtimes)\b`)

// checkSteps fails when a step's words name a kubectl mpijob command its
// Command does not hold, when its Command is not in its words as written,
// or when a placeholder for the job's name is left in it: the SDK and the
// dashboard render the Command, so such a step would say one thing in the
// CLI and another there. The texts are the steps' too.
func checkSteps(t *testing.T, job string, s api.Status) {
	t.Helper()
	for _, st := range s.Steps {
		switch {
		case strings.TrimSpace(st.Text) == "":
			t.Errorf("%s: a step with no words: %+v", s.Reason, st)
		case st.Command == nil && mpijobCommand.MatchString(st.Text):
			t.Errorf("%s: a step names a command but holds none: %s", s.Reason, st.Text)
		case st.Command != nil && !strings.Contains(st.Text, st.Command.String()):
			t.Errorf("%s: step's command %q is not in its words: %s", s.Reason, st.Command, st.Text)
		case st.Command != nil && jobVerbs[st.Command.Verb] > 0 && (len(st.Command.Args) == 0 || st.Command.Args[0] != job):
			t.Errorf("%s: step's command %q does not name the job %s", s.Reason, st.Command, job)
		case st.Command != nil && slices.Contains(st.Command.Args, api.NewPlaceholder):
			t.Errorf("%s: step's command %q keeps the placeholder NEW", s.Reason, st.Command)
		}
	}
	if texts := api.StepTexts(s.Steps); len(texts) > 1 && !cmp.Equal(texts, s.NextSteps) || len(texts) > 0 && texts[0] != s.NextStep || len(texts) == 0 && s.NextStep != "" {
		t.Errorf("%s: next steps %q and %q are not the steps' texts %q", s.Reason, s.NextStep, s.NextSteps, texts)
	}
}

var (
	namedWorker     = regexp.MustCompile(`\bWorker (\d+)\b`)
	namedWorkerHost = regexp.MustCompile(`-node-\d+-(\d+)\b`)
)

// subjectNamedIn reads the pod a message names, as people read it: the
// first "Worker N", else a Worker's host or pod name, else a message that
// starts with the Launcher. Tests only: the manager never reads its own
// messages back (Status.Subject).
func subjectNamedIn(message string) *api.PodRef {
	m := namedWorker.FindStringSubmatch(message)
	if m == nil {
		m = namedWorkerHost.FindStringSubmatch(message)
	}
	if m != nil {
		i, _ := strconv.Atoi(m[1])
		return api.WorkerRef(int32(i))
	}
	if strings.HasPrefix(message, "The Launcher") {
		return api.LauncherRef()
	}
	return nil
}

// leavesInput fails when run changes anything in reaches (the JobSet, the
// pods and what they point to, the Events, the nodes ...), compared as
// JSON before and after.
func leavesInput(t *testing.T, what string, in Input, run func()) {
	t.Helper()
	before, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	run()
	after, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(before), string(after)); diff != "" {
		t.Errorf("%s changed its input, which is the manager's cache itself (-before,+after):\n%s", what, diff)
	}
}

func trimmed(t *testing.T, in Input) Input {
	t.Helper()
	if in.JobSet != nil {
		js, err := TrimJobSet(in.JobSet.DeepCopy())
		if err != nil {
			t.Fatal(err)
		}
		in.JobSet = js.(*jobsetv1alpha2.JobSet)
	}
	trim := func(ps []corev1.Pod) []corev1.Pod {
		var out []corev1.Pod
		for i := range ps {
			p, err := TrimJobSetPod(withNoise(ps[i].DeepCopy()))
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, *p.(*corev1.Pod))
		}
		return out
	}
	in.Launcher, in.Workers = trim(in.Launcher), trim(in.Workers)
	if in.TrainJob != nil {
		tj := in.TrainJob.DeepCopy()
		if tj.Annotations == nil {
			tj.Annotations = map[string]string{}
		}
		// What a tenant may write and no reader uses.
		tj.Annotations["kubectl.kubernetes.io/last-applied-configuration"] = strings.Repeat("x", 1<<10)
		out, err := TrimTrainJob(tj)
		if err != nil {
			t.Fatal(err)
		}
		in.TrainJob = out.(*trainer.TrainJob)
	}
	return in
}

// withNoise gives a test pod what a real one carries and no reader uses,
// so the trim has something to drop.
func withNoise(p *corev1.Pod) *corev1.Pod {
	p.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kube-controller-manager"}}
	if p.Labels == nil {
		p.Labels = map[string]string{}
	}
	if p.Annotations == nil {
		p.Annotations = map[string]string{}
	}
	for _, k := range []string{"jobset.sigs.k8s.io/job-key", "jobset.sigs.k8s.io/restart-attempt", "batch.kubernetes.io/controller-uid", "controller-uid", "job-name"} {
		p.Labels[k], p.Annotations[k] = "noise", "noise"
	}
	for i := range p.Spec.Containers {
		p.Spec.Containers[i].Env = append(p.Spec.Containers[i].Env, corev1.EnvVar{Name: "OMPI_MCA_orte_keep_fqdn_hostnames", Value: "true"})
		p.Spec.Containers[i].VolumeMounts = append(p.Spec.Containers[i].VolumeMounts, corev1.VolumeMount{Name: "mpi-ssh-auth", MountPath: "/root/.ssh"})
	}
	p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "mpi-ssh-auth", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "hello-mpi-ssh"}}})
	p.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true)}
	if p.Spec.Affinity == nil {
		p.Spec.Affinity = &corev1.Affinity{}
	}
	p.Spec.Affinity.PodAntiAffinity = &corev1.PodAntiAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{Weight: 1}}}
	for i := range p.Spec.Containers {
		c := &p.Spec.Containers[i]
		c.Ports = append(c.Ports, corev1.ContainerPort{ContainerPort: 2222})
		c.SecurityContext = &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false)}
		c.LivenessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{}}}
	}
	cpu := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}
	p.Status.Resources = &corev1.ResourceRequirements{Requests: cpu}
	p.Status.AllocatedResources = cpu
	p.Status.PodIPs, p.Status.HostIPs = []corev1.PodIP{{IP: "10.244.1.5"}}, []corev1.HostIP{{IP: "10.0.0.2"}}
	for i := range p.Status.ContainerStatuses {
		cs := &p.Status.ContainerStatuses[i]
		cs.ContainerID, cs.ImageID = "containerd://0123", "sha256:0123"
		cs.Resources, cs.AllocatedResources = &corev1.ResourceRequirements{Requests: cpu}, cpu
		cs.VolumeMounts = []corev1.VolumeMountStatus{{Name: "mpi-ssh-auth", MountPath: "/root/.ssh"}}
	}
	return p
}

func TestTrimJobSetPod(t *testing.T) {
	w := worker("0").Running(true).Obj()
	p := withNoise(&w)
	p.Spec.Containers[0].Command = []string{"/usr/sbin/sshd", "-De"}
	p.Spec.Containers[0].ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{}}}
	p.Spec.Containers[0].Env = append(p.Spec.Containers[0].Env, corev1.EnvVar{Name: "BIG", Value: strings.Repeat("x", 4096)})
	p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "data", VolumeSource: corev1.VolumeSource{
		PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "team-data"}}})
	p.Annotations["batch.kubernetes.io/job-completion-index"] = "0"
	want := p.DeepCopy()
	want.ManagedFields = nil
	want.Labels = map[string]string{"batch.kubernetes.io/job-completion-index": "0", "jobset.sigs.k8s.io/replicatedjob-name": "node"}
	want.Annotations = nil // the index is read from the label, which it has
	want.Spec.Containers[0].Env, want.Spec.Containers[0].VolumeMounts = nil, nil
	want.Spec.Containers[0].Ports, want.Spec.Containers[0].SecurityContext, want.Spec.Containers[0].LivenessProbe = nil, nil, nil
	want.Spec.SecurityContext = nil
	want.Spec.Affinity = nil // only an affinity to nodes stays
	want.Status.Resources, want.Status.AllocatedResources, want.Status.PodIPs, want.Status.HostIPs = nil, nil, nil, nil
	for i := range want.Status.ContainerStatuses {
		cs := &want.Status.ContainerStatuses[i]
		cs.ContainerID, cs.ImageID, cs.Resources, cs.AllocatedResources, cs.VolumeMounts = "", "", nil, nil, nil
	}
	want.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
		PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "team-data"}}}}
	got, err := TrimJobSetPod(p)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("trimmed pod (-want,+got):\n%s", diff)
	}
	if o, _ := TrimJobSetPod(&corev1.Node{}); o.(*corev1.Node) == nil {
		t.Error("another kind of object was not passed through")
	}
}

func TestTrimJobSetKeepsTheWorkerCount(t *testing.T) {
	js := jobset(4)
	js.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec.Containers = []corev1.Container{{Name: "node", Image: "ghcr.io/mpijob/openmpi:4.1"}}
	js.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "jobset"}}
	before := workersTotal(Input{TrainJob: job(4).Obj(), JobSet: js.DeepCopy()})
	got, err := TrimJobSet(js)
	if err != nil {
		t.Fatal(err)
	}
	tr := got.(*jobsetv1alpha2.JobSet)
	if after := workersTotal(Input{TrainJob: job(4).Obj(), JobSet: tr}); after != before || after != 4 {
		t.Errorf("Workers: %d before the trim, %d after; want 4", before, after)
	}
	for _, rj := range tr.Spec.ReplicatedJobs {
		if len(rj.Template.Spec.Template.Spec.Containers) != 0 {
			t.Errorf("replicated Job %s kept its pod template", rj.Name)
		}
	}
	if tr.ManagedFields != nil {
		t.Error("managed fields kept")
	}
}

// The manager's one pod cache: a JobSet's pod is trimmed for the
// diagnosis, any other pod down to what free capacity counts.
func TestTrimPod(t *testing.T) {
	w := worker("0").Running(true).Obj()
	w.Labels["jobset.sigs.k8s.io/jobset-name"] = "hello"
	other := w.DeepCopy()
	other.Name, other.Labels = "web-7d9f", map[string]string{"app": "web"}
	cases := map[string]struct {
		pod  *corev1.Pod
		want func(any) (any, error)
	}{
		"a JobSet's pod": {pod: withNoise(w.DeepCopy()), want: TrimJobSetPod},
		"another pod":    {pod: withNoise(other), want: CapacityPod},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			want, _ := tc.want(tc.pod.DeepCopy())
			got, err := TrimPod(tc.pod)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("trimmed pod (-want,+got):\n%s", diff)
			}
		})
	}
	if got, _ := TrimPod(w.DeepCopy()); got.(*corev1.Pod).Labels["jobset.sigs.k8s.io/replicatedjob-name"] != "node" {
		t.Error("a JobSet's pod lost its role")
	}
	if got, _ := TrimPod(other.DeepCopy()); len(got.(*corev1.Pod).Labels) != 0 {
		t.Error("another pod kept its labels: the cache's JobSet index would count it")
	}
	if o, _ := TrimPod(&corev1.Node{}); o.(*corev1.Node) == nil {
		t.Error("another kind of object was not passed through")
	}
}

// The diagnosis names a pod's required node affinity when it fits no node:
// the trim keeps the affinity to nodes and drops the one to other pods.
func TestTrimJobSetPodKeepsNodeAffinity(t *testing.T) {
	w := worker("0").Obj()
	p := withNoise(&w)
	nodes := &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
		MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "gpu", Operator: corev1.NodeSelectorOpIn, Values: []string{"h100"}}}}}}}
	p.Spec.Affinity.NodeAffinity = nodes.DeepCopy()
	got, err := TrimJobSetPod(p)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(&corev1.Affinity{NodeAffinity: nodes}, got.(*corev1.Pod).Spec.Affinity); diff != "" {
		t.Errorf("affinity (-want,+got):\n%s", diff)
	}
}

// TestWorkersTotal: the Worker count the status reports is the JobSet's
// once it exists, else the runtime's shape (one fewer than numNodes when
// the Launcher hosts ranks: the count the SDK and CLI show), else the
// job's numNodes.
func TestWorkersTotal(t *testing.T) {
	cases := map[string]struct {
		in   Input
		want int32
	}{
		"the JobSet's Workers":                    {in: Input{TrainJob: job(4).Obj(), JobSet: jobset(3), ShapeWorkers: 2}, want: 3},
		"no JobSet yet: the runtime's shape":      {in: Input{TrainJob: job(4).Obj(), ShapeWorkers: 3}, want: 3},
		"no JobSet, runtime unknown: numNodes":    {in: Input{TrainJob: job(4).Obj()}, want: 4},
		"no JobSet, no numNodes, no runtime: one": {in: Input{TrainJob: &trainer.TrainJob{}}, want: 1},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, workersTotal(tc.in)); diff != "" {
				t.Errorf("Workers (-want,+got):\n%s", diff)
			}
		})
	}
}

// The trim holds once what a Worker repeats within itself: limits written
// as the requests share their map, and the index annotation goes where the
// label says the same; the values read stay the same.
func TestTrimJobSetPodHoldsRepeatsOnce(t *testing.T) {
	q := func(kv ...string) corev1.ResourceList {
		out := corev1.ResourceList{}
		for i := 0; i < len(kv); i += 2 {
			out[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
		}
		return out
	}
	cases := map[string]struct {
		requests, limits corev1.ResourceList
		indexLabel       bool
		wantSharedLimits bool
		wantAnnotations  map[string]string
	}{
		"Guaranteed Worker": {
			requests: q("cpu", "300m", "memory", "300Mi"), limits: q("cpu", "300m", "memory", "300Mi"), indexLabel: true,
			wantSharedLimits: true,
		},
		"limits above the requests": {
			requests: q("cpu", "300m"), limits: q("cpu", "1"), indexLabel: true,
		},
		"the same amount written another way": {
			requests: q("memory", "1Gi"), limits: q("memory", "1073741824"), indexLabel: true,
		},
		"limits on fewer resources": {
			requests: q("cpu", "1", "memory", "1Gi"), limits: q("cpu", "1"), indexLabel: true,
		},
		"no resources": {indexLabel: true},
		"no index label: the annotation stays": {
			wantAnnotations: map[string]string{"batch.kubernetes.io/job-completion-index": "3"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			w := worker("3").Running(true).Obj()
			if !tc.indexLabel {
				delete(w.Labels, "batch.kubernetes.io/job-completion-index")
			}
			if w.Annotations == nil {
				w.Annotations = map[string]string{}
			}
			w.Annotations["batch.kubernetes.io/job-completion-index"] = "3"
			w.Spec.Containers[0].Resources = corev1.ResourceRequirements{Requests: tc.requests, Limits: tc.limits}
			sent := w.DeepCopy()
			o, err := TrimJobSetPod(&w)
			if err != nil {
				t.Fatal(err)
			}
			got := o.(*corev1.Pod)
			r := got.Spec.Containers[0].Resources
			// The values read are those sent.
			if d := cmp.Diff(sent.Spec.Containers[0].Resources, r); d != "" {
				t.Errorf("resources (-sent +cached):\n%s", d)
			}
			if d := cmp.Diff(tc.wantAnnotations, got.Annotations); d != "" {
				t.Errorf("annotations (-want +got):\n%s", d)
			}
			if s := workerName(got); s != "Worker 3 (pod "+got.Name+")" {
				t.Errorf("workerName %q, want Worker 3", s)
			}
			sharedLimits := len(r.Limits) > 0 && fmt.Sprintf("%p", r.Limits) == fmt.Sprintf("%p", r.Requests)
			if sharedLimits != tc.wantSharedLimits {
				t.Errorf("limits held as the requests: %t, want %t", sharedLimits, tc.wantSharedLimits)
			}
		})
	}
}

// TestTrimJobSetPodSharesWhatWorkersRepeat: a second pod whose containers,
// owner, affinity, node selector, tolerations, conditions or container
// states serialize as the first one's points at the first one's; anything
// else keeps its own copy, and every pod reads as it was sent, trimmed.
func TestTrimJobSetPodSharesWhatWorkersRepeat(t *testing.T) {
	at := func(s int) metav1.Time { return metav1.NewTime(time.Date(2026, 11, 25, 12, 0, s, 0, time.UTC)) }
	pod := func(job, index, image string, ready metav1.Time, taints ...string) *corev1.Pod {
		w := worker(index).Running(true).Obj()
		// The API server's two default tolerations, then the Worker's own.
		w.Spec.Tolerations = []corev1.Toleration{
			{Key: "node.kubernetes.io/not-ready", Operator: "Exists", Effect: "NoExecute", TolerationSeconds: ptr.To[int64](300)},
			{Key: "node.kubernetes.io/unreachable", Operator: "Exists", Effect: "NoExecute", TolerationSeconds: ptr.To[int64](300)},
		}
		for _, k := range taints {
			w.Spec.Tolerations = append(w.Spec.Tolerations, corev1.Toleration{Key: k, Operator: "Exists", Effect: "NoSchedule"})
		}
		w.Labels[jobsetv1alpha2.JobSetNameKey] = job
		w.OwnerReferences = []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: job + "-node-0", UID: types.UID(job), Controller: ptr.To(true)}}
		w.Spec.Containers[0].Image = image
		w.Spec.Containers[0].Command = []string{"/usr/sbin/sshd", "-De"}
		w.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "pool", Operator: "In", Values: []string{job}}}}},
		}}}
		w.Spec.NodeSelector = map[string]string{"mpijob.dev/pool": job}
		for i := range w.Status.Conditions {
			w.Status.Conditions[i].LastTransitionTime = ready
		}
		w.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "node", Image: image, Ready: true,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: ready}}}}
		return &w
	}
	type parts struct{ Containers, Owners, Affinity, NodeSelector, Tolerations, Conditions, States bool }
	cases := map[string]struct {
		first, second *corev1.Pod
		want          parts
	}{
		"two Workers of one job, ready in the same second": {
			first: pod("a", "1", "img:1", at(1)), second: pod("a", "2", "img:1", at(1)),
			want: parts{Containers: true, Owners: true, Affinity: true, NodeSelector: true, Tolerations: true, Conditions: true, States: true},
		},
		"a Worker ready a second later": {
			first: pod("b", "1", "img:1", at(1)), second: pod("b", "2", "img:1", at(2)),
			want: parts{Containers: true, Owners: true, Affinity: true, NodeSelector: true, Tolerations: true},
		},
		"another job's Worker, the same image": {
			first: pod("c", "1", "img:1", at(1)), second: pod("d", "1", "img:1", at(1)),
			want: parts{Containers: true, Tolerations: true, Conditions: true, States: true},
		},
		"another image": {
			first: pod("e", "1", "img:1", at(3)), second: pod("e", "2", "img:2", at(3)),
			want: parts{Owners: true, Affinity: true, NodeSelector: true, Tolerations: true, Conditions: true},
		},
		"two GPU Workers of one job": {
			first: pod("f", "1", "img:1", at(4), "nvidia.com/gpu"), second: pod("f", "2", "img:1", at(4), "nvidia.com/gpu"),
			want: parts{Containers: true, Owners: true, Affinity: true, NodeSelector: true, Tolerations: true, Conditions: true, States: true},
		},
		"a Worker that tolerates another taint": {
			first: pod("g", "1", "img:1", at(5), "nvidia.com/gpu"), second: pod("g", "2", "img:1", at(5), "example.com/fpga"),
			want: parts{Containers: true, Owners: true, Affinity: true, NodeSelector: true, Conditions: true, States: true},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			wantFirst, wantSecond := tc.first.DeepCopy(), tc.second.DeepCopy()
			trimJobSetPod(wantFirst)
			trimJobSetPod(wantSecond)
			o1, err := TrimJobSetPod(tc.first)
			if err != nil {
				t.Fatal(err)
			}
			o2, err := TrimJobSetPod(tc.second)
			if err != nil {
				t.Fatal(err)
			}
			p1, p2 := o1.(*corev1.Pod), o2.(*corev1.Pod)
			if d := cmp.Diff(wantFirst, p1); d != "" {
				t.Errorf("first pod (-sent, trimmed +cached):\n%s", d)
			}
			if d := cmp.Diff(wantSecond, p2); d != "" {
				t.Errorf("second pod (-sent, trimmed +cached):\n%s", d)
			}
			got := parts{
				Containers:   &p1.Spec.Containers[0] == &p2.Spec.Containers[0],
				Owners:       &p1.OwnerReferences[0] == &p2.OwnerReferences[0],
				Affinity:     p1.Spec.Affinity != nil && p1.Spec.Affinity == p2.Spec.Affinity,
				NodeSelector: fmt.Sprintf("%p", p1.Spec.NodeSelector) == fmt.Sprintf("%p", p2.Spec.NodeSelector),
				Tolerations:  &p1.Spec.Tolerations[0] == &p2.Spec.Tolerations[0],
				Conditions:   &p1.Status.Conditions[0] == &p2.Status.Conditions[0],
				States:       &p1.Status.ContainerStatuses[0] == &p2.Status.ContainerStatuses[0],
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("parts held once (-want +got):\n%s", d)
			}
		})
	}
}

// TestSharedForgetsWhatNoPodHolds: the table of shared values holds them
// weakly, so it does not grow with every job the manager ever saw.
func TestSharedForgetsWhatNoPodHolds(t *testing.T) {
	var s shared[corev1.Container]
	held := make([][]corev1.Container, 0, 100)
	for i := range 100 {
		held = append(held, s.slice([]corev1.Container{{Name: "node", Image: fmt.Sprintf("img:%d", i)}}))
		s.slice([]corev1.Container{{Name: "node", Image: fmt.Sprintf("img:%d", i)}})
	}
	if got := s.size(); got != 100 {
		t.Fatalf("%d values held, want 100 (one per image)", got)
	}
	// Past this point nothing holds the values: cleanups run on their own
	// goroutine after a collection.
	runtime.KeepAlive(held)
	for range 100 {
		runtime.GC()
		if s.size() == 0 {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Errorf("%d values still held after every pod holding them was collected, want 0", s.size())
}

// The cache keeps a TrainJob's annotations that the manager reads and no
// other: a tenant's own, of any size, cost the manager nothing.
func TestTrimTrainJob(t *testing.T) {
	tj := &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Name: "j", ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}, Annotations: map[string]string{
		api.StatusAnnotation: `{"phase":"Running"}`, api.CreatorAnnotation: "dev-a", "policy.mpijob.dev/progress-timeout": "5m",
		"trainer.opendatahub.io/trainerStatus": "{}", "team.example.com/notes": strings.Repeat("n", 240<<10), api.DescriptionAnnotation: "digits",
	}}}
	out, err := TrimTrainJob(tj)
	if err != nil {
		t.Fatal(err)
	}
	got := out.(*trainer.TrainJob)
	want := map[string]string{api.StatusAnnotation: `{"phase":"Running"}`, api.CreatorAnnotation: "dev-a", "policy.mpijob.dev/progress-timeout": "5m", "trainer.opendatahub.io/trainerStatus": "{}"}
	if diff := cmp.Diff(want, got.Annotations); diff != "" || got.ManagedFields != nil {
		t.Errorf("annotations kept (-want +got):\n%s\nmanaged fields %v", diff, got.ManagedFields)
	}
}

// TestShareRepeatsAllocatesNothing: finding what a cached Worker repeats
// costs no allocation once its parts are held (keyOf hashes their
// protobuf encoding through a pooled buffer). Hashing their JSON, as the
// cache did until 2026-12-03, made 44 allocations a Worker, for
// every pod event on both replicas.
func TestShareRepeatsAllocatesNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector's sync.Pool drops pooled buffers on purpose: allocations are counted without -race")
	}
	p := realWorker(t)
	p.Spec.NodeSelector = map[string]string{"nvidia.com/gpu.product": "NVIDIA-H200", "kubernetes.io/arch": "amd64"}
	trimJobSetPod(p)
	shareRepeats(p)
	if allocs := testing.AllocsPerRun(100, func() { shareRepeats(p) }); allocs != 0 {
		t.Errorf("shareRepeats made %.0f allocations a Worker, want 0", allocs)
	}
}

// TestKeyOf: equal values give one key, whatever their maps' order; a
// change anywhere, or where one value ends and the next begins, gives
// another.
func TestKeyOf(t *testing.T) {
	tol := func(key string) corev1.Toleration {
		return corev1.Toleration{Key: key, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute}
	}
	res := func(cpu, mem string) corev1.Container {
		return corev1.Container{Name: "w", Image: "img", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)}}}
	}
	same := func(a, b []corev1.Container) bool {
		ka, oka := keyOf(a)
		kb, okb := keyOf(b)
		return oka && okb && ka == kb
	}
	if !same([]corev1.Container{res("1", "1Gi")}, []corev1.Container{res("1", "1Gi")}) {
		t.Error("two equal containers have different keys")
	}
	if same([]corev1.Container{res("1", "1Gi")}, []corev1.Container{res("1", "2Gi")}) {
		t.Error("containers that ask for different memory have one key")
	}
	if same([]corev1.Container{res("1", "1Gi")}, []corev1.Container{res("1", "1Gi"), res("1", "1Gi")}) {
		t.Error("one container and two have one key")
	}
	a, _ := keyOf([]corev1.Toleration{tol("a"), tol("b")})
	b, _ := keyOf([]corev1.Toleration{tol("b"), tol("a")})
	if a == b {
		t.Error("tolerations in another order have the same key (their order is part of the pod)")
	}
	m1 := map[string]string{"a": "1", "b": "2", "c": "3"}
	m2 := map[string]string{"c": "3", "b": "2", "a": "1"}
	k1, _ := keyOf([]map[string]string{m1})
	k2, _ := keyOf([]map[string]string{m2})
	if k1 != k2 {
		t.Error("equal node selectors have different keys")
	}
	k3, _ := keyOf([]map[string]string{{"a": "12", "b": "", "c": "3"}})
	k4, _ := keyOf([]map[string]string{{"a": "1", "b": "2", "c": "3"}})
	if k3 == k4 {
		t.Error("node selectors whose values are split differently have one key")
	}
}
