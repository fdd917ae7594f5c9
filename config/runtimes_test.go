package config_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"github.com/mpijob/mpijob/pkg/manifests"
	"github.com/mpijob/mpijob/pkg/runtimes"
)

// shippedRuntimes are the runtimes docs/runtimes.md documents.
var shippedRuntimes = []string{
	"mpi-deepspeed", "mpi-horovod", "mpi-intel", "mpi-mpich", "mpi-openmpi", "mpi-openmpi-gpu", "mpi-openmpi5",
}

func loadRuntimes(t *testing.T) map[string]*trainer.ClusterTrainingRuntime {
	t.Helper()
	objs, err := manifests.ParseFiles("runtimes")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*trainer.ClusterTrainingRuntime{}
	for _, o := range objs {
		if o.GetKind() != "ClusterTrainingRuntime" {
			continue
		}
		rt := &trainer.ClusterTrainingRuntime{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(o.Object, rt, true); err != nil {
			t.Fatalf("runtime %s does not decode strictly: %v", o.GetName(), err)
		}
		out[rt.Name] = rt
	}
	return out
}

// TestRuntimesPassPodSecurityRestricted evaluates every pod template of
// every runtime with the upstream Pod Security "restricted" checks, and the
// rules OpenShift's restricted-v2 adds (no fixed runAsUser).
func TestRuntimesPassPodSecurityRestricted(t *testing.T) {
	rts := loadRuntimes(t)
	if len(rts) != len(shippedRuntimes) {
		t.Errorf("config/runtimes has %d runtimes, want %d (%v)", len(rts), len(shippedRuntimes), shippedRuntimes)
	}
	eval, err := policy.NewEvaluator(policy.DefaultChecks(), nil)
	if err != nil {
		t.Fatal(err)
	}
	restricted := api.LevelVersion{Level: api.LevelRestricted, Version: api.LatestVersion()}
	for _, name := range shippedRuntimes {
		rt, ok := rts[name]
		if !ok {
			t.Errorf("runtime %s is missing from config/runtimes", name)
			continue
		}
		t.Run(name, func(t *testing.T) {
			if !runtimes.IsMPI(&rt.Spec) {
				t.Fatalf("runtime %s has no MPI ML policy", name)
			}
			if rt.Annotations["mpijob.dev/description"] == "" {
				t.Errorf("runtime %s has no mpijob.dev/description", name)
			}
			for _, rj := range rt.Spec.Template.Spec.ReplicatedJobs {
				pod := rj.Template.Spec.Template
				for _, r := range eval.EvaluatePod(restricted, &pod.ObjectMeta, &pod.Spec) {
					if !r.Allowed {
						t.Errorf("%s: Pod Security restricted: %s: %s", rj.Name, r.ForbiddenReason, r.ForbiddenDetail)
					}
				}
				if pod.Annotations["sidecar.istio.io/inject"] != "false" {
					t.Errorf("%s: want annotation sidecar.istio.io/inject: \"false\"", rj.Name)
				}
				checkNoFixedUID(t, rj.Name, pod.Spec)
			}
		})
	}
}

func checkNoFixedUID(t *testing.T, job string, spec corev1.PodSpec) {
	t.Helper()
	if sc := spec.SecurityContext; sc != nil && sc.RunAsUser != nil {
		t.Errorf("%s: pod runAsUser is fixed to %d; OpenShift restricted-v2 assigns one", job, *sc.RunAsUser)
	}
	for _, c := range append(append([]corev1.Container{}, spec.InitContainers...), spec.Containers...) {
		if c.SecurityContext != nil && c.SecurityContext.RunAsUser != nil {
			t.Errorf("%s/%s: runAsUser is fixed to %d; OpenShift restricted-v2 assigns one", job, c.Name, *c.SecurityContext.RunAsUser)
		}
	}
}

// TestRuntimesShape checks the contract every runtime keeps: Workers first
// running sshd on port 2222, a Launcher that starts only when Workers are
// Ready, a failed Worker failing the job.
func TestRuntimesShape(t *testing.T) {
	for name, rt := range loadRuntimes(t) {
		t.Run(name, func(t *testing.T) {
			rjs := rt.Spec.Template.Spec.ReplicatedJobs
			if len(rjs) != 2 || rjs[0].Name != "node" || rjs[1].Name != "launcher" {
				t.Fatalf("replicated jobs must be [node launcher], got %v", jobNames(rjs))
			}
			worker, launcher := rjs[0], rjs[1]
			if bl := worker.Template.Spec.BackoffLimit; bl == nil || *bl != 0 {
				t.Errorf("node: backoffLimit must be 0 (a lost rank cannot rejoin), got %v", bl)
			}
			if len(launcher.DependsOn) != 1 || launcher.DependsOn[0].Name != "node" || launcher.DependsOn[0].Status != jobsetv1alpha2.DependencyReady {
				t.Errorf("launcher must depend on node Ready, got %+v", launcher.DependsOn)
			}
			w := container(worker.Template.Spec.Template.Spec)
			if w == nil {
				t.Fatal("node has no container named node")
			}
			if got := strings.Join(w.Command, " "); !strings.Contains(got, "sshd") {
				t.Errorf("Worker command %q does not run sshd", got)
			}
			if len(w.Ports) != 1 || w.Ports[0].ContainerPort != 2222 {
				t.Errorf("Worker must expose sshd on 2222, got %+v", w.Ports)
			}
			if w.ReadinessProbe == nil || w.ReadinessProbe.TCPSocket == nil || w.ReadinessProbe.TCPSocket.Port.IntValue() != 2222 {
				t.Errorf("Worker readiness must be sshd accepting on 2222")
			}
			if l := container(launcher.Template.Spec.Template.Spec); l == nil || len(l.Command) == 0 {
				t.Errorf("launcher has no container named node with a default command")
			}
		})
	}
}

// TestHydraRuntimesDeriveHostfile checks that the Intel MPI runtime turns
// Trainer's OpenMPI hostfile into Hydra's form before the Launcher starts
// and points mpiexec.hydra at it.
func TestHydraRuntimesDeriveHostfile(t *testing.T) {
	rt := loadRuntimes(t)["mpi-intel"]
	spec := rt.Spec.Template.Spec.ReplicatedJobs[1].Template.Spec.Template.Spec
	hydra := initContainer(spec, "hydra-hostfile")
	if hydra == nil || !strings.Contains(strings.Join(hydra.Command, " "), "s/ slots=/:/") {
		t.Fatalf("mpi-intel Launcher needs the hydra-hostfile init step, got %+v", spec.InitContainers)
	}
	env := map[string]string{}
	for _, e := range container(spec).Env {
		env[e.Name] = e.Value
	}
	if env["I_MPI_HYDRA_HOST_FILE"] != "/etc/mpi-hydra/hostfile" {
		t.Errorf("I_MPI_HYDRA_HOST_FILE = %q, want /etc/mpi-hydra/hostfile", env["I_MPI_HYDRA_HOST_FILE"])
	}
}

// TestOpenMPI5SetsPRRTEVariables: OpenMPI 5 ignores OMPI_MCA_orte_*; without
// the PRRTE hostfile variable every rank would run on the Launcher.
func TestOpenMPI5SetsPRRTEVariables(t *testing.T) {
	rt := loadRuntimes(t)["mpi-openmpi5"]
	env := map[string]string{}
	for _, e := range container(rt.Spec.Template.Spec.ReplicatedJobs[1].Template.Spec.Template.Spec).Env {
		env[e.Name] = e.Value
	}
	for k, want := range map[string]string{"PRTE_MCA_prte_default_hostfile": "/etc/mpi/hostfile", "PRTE_MCA_prte_keep_fqdn_hostnames": "1"} {
		if env[k] != want {
			t.Errorf("%s = %q, want %q", k, env[k], want)
		}
	}
}

// container returns the pod's container "node", the one Trainer fills in.
func container(spec corev1.PodSpec) *corev1.Container {
	for i := range spec.Containers {
		if spec.Containers[i].Name == "node" {
			return &spec.Containers[i]
		}
	}
	return nil
}

func jobNames(rjs []jobsetv1alpha2.ReplicatedJob) []string {
	var out []string
	for _, r := range rjs {
		out = append(out, r.Name)
	}
	return out
}

// TestLaunchersWaitForWorkers checks that every runtime's Launcher waits,
// before mpirun, until each Worker's sshd in Trainer's hostfile answers: a
// new pod's DNS record and the NetworkPolicy rules that admit it follow its
// creation, and mpirun fails at once against a Worker it cannot reach.
func TestLaunchersWaitForWorkers(t *testing.T) {
	for name, rt := range loadRuntimes(t) {
		t.Run(name, func(t *testing.T) {
			spec := rt.Spec.Template.Spec.ReplicatedJobs[1].Template.Spec.Template.Spec
			if len(spec.InitContainers) == 0 || spec.InitContainers[0].Name != "wait-for-workers" {
				t.Fatalf("the Launcher's first init container must be wait-for-workers, got %+v", spec.InitContainers)
			}
			w := spec.InitContainers[0]
			script := strings.Join(w.Command, " ")
			for _, want := range []string{"/etc/mpi/hostfile", "/dev/tcp/$h/2222", "exit 1"} {
				if !strings.Contains(script, want) {
					t.Errorf("wait-for-workers script lacks %q", want)
				}
			}
			if len(w.VolumeMounts) != 1 || w.VolumeMounts[0].Name != "mpi-hostfile" || w.VolumeMounts[0].MountPath != "/etc/mpi" {
				t.Errorf("wait-for-workers must mount Trainer's hostfile volume mpi-hostfile at /etc/mpi, got %+v", w.VolumeMounts)
			}
			if w.SecurityContext == nil || w.SecurityContext.AllowPrivilegeEscalation == nil || *w.SecurityContext.AllowPrivilegeEscalation {
				t.Errorf("wait-for-workers must run under the restricted Pod Security level")
			}
		})
	}
}

func initContainer(spec corev1.PodSpec, name string) *corev1.Container {
	for i := range spec.InitContainers {
		if spec.InitContainers[i].Name == name {
			return &spec.InitContainers[i]
		}
	}
	return nil
}

// TestLaunchersDoNotPinRanks checks that no runtime's mpirun pins ranks to
// cores: a Worker sees every core of its node, and OpenMPI's and Intel
// MPI's default pinning puts every job's rank 0 on core 0 (docs/runtimes.md,
// "Ranks are not pinned to cores"). MPICH's Hydra pins only when asked.
func TestLaunchersDoNotPinRanks(t *testing.T) {
	unpin := map[string]map[string]string{
		"mpi-openmpi":     {"OMPI_MCA_hwloc_base_binding_policy": "none"},
		"mpi-openmpi-gpu": {"OMPI_MCA_hwloc_base_binding_policy": "none"},
		"mpi-horovod":     {"OMPI_MCA_hwloc_base_binding_policy": "none"},
		"mpi-openmpi5":    {"PRTE_MCA_hwloc_default_binding_policy": "none"},
		"mpi-deepspeed":   {"PRTE_MCA_hwloc_default_binding_policy": "none"},
		"mpi-intel":       {"I_MPI_PIN": "0"},
		"mpi-mpich":       {},
	}
	rts := loadRuntimes(t)
	for _, name := range shippedRuntimes {
		want, ok := unpin[name]
		if !ok {
			t.Errorf("runtime %s: say here which setting keeps its ranks unpinned", name)
			continue
		}
		rt := rts[name]
		var launcher *corev1.Container
		for _, rj := range rt.Spec.Template.Spec.ReplicatedJobs {
			if rj.Name == "launcher" {
				launcher = container(rj.Template.Spec.Template.Spec)
			}
		}
		if launcher == nil {
			t.Errorf("runtime %s has no Launcher container", name)
			continue
		}
		env := map[string]string{}
		for _, e := range launcher.Env {
			env[e.Name] = e.Value
		}
		for k, v := range want {
			if env[k] != v {
				t.Errorf("runtime %s: the Launcher's %s = %q, want %q", name, k, env[k], v)
			}
		}
		if strings.Contains(strings.Join(launcher.Command, " "), "--bind-to core") {
			t.Errorf("runtime %s: the Launcher's command pins ranks (--bind-to core)", name)
		}
	}
}

// TestWorkersSSHDSurvivesABusyNode checks what keeps mpirun's SSH login
// from being dropped on a starved node: sshd lets 100 connections wait
// unauthenticated (its default drops at random past 10, and the probes'
// short sessions pile up there), and the Workers are probed every second
// only until sshd listens, then every 10 s.
func TestWorkersSSHDSurvivesABusyNode(t *testing.T) {
	rts := loadRuntimes(t)
	for _, name := range shippedRuntimes {
		t.Run(name, func(t *testing.T) {
			var w *corev1.Container
			for _, rj := range rts[name].Spec.Template.Spec.ReplicatedJobs {
				if rj.Name == "node" {
					w = container(rj.Template.Spec.Template.Spec)
				}
			}
			if w == nil {
				t.Fatal("no Worker container")
			}
			if got := strings.Join(w.Command, " "); !strings.Contains(got, "-o MaxStartups=100 ") {
				t.Errorf("the Worker's sshd must run with -o MaxStartups=100, command: %s", got)
			}
			type probe struct {
				Port            string
				Period, Failure int32
			}
			seen := func(p *corev1.Probe) *probe {
				if p == nil || p.TCPSocket == nil {
					return nil
				}
				return &probe{p.TCPSocket.Port.String(), p.PeriodSeconds, p.FailureThreshold}
			}
			if diff := cmp.Diff(&probe{"2222", 1, 600}, seen(w.StartupProbe)); diff != "" {
				t.Errorf("startup probe (-want +got):\n%s", diff)
			}
			if got := seen(w.ReadinessProbe); got == nil || got.Port != "2222" || got.Period < 10 {
				t.Errorf("readiness probe: want TCP 2222 every 10 s or more, got %+v", got)
			}
		})
	}
}
