//go:build e2e

package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mpijob/mpijob/pkg/localcluster"
	"github.com/mpijob/mpijob/test/framework"
)

// legacyMPIJob is a kubeflow.org/v2beta1 MPIJob as mpi-operator users
// have them: their own image and resources on the Launcher and the
// Workers, and a Worker volume and environment variable.
func legacyMPIJob(name string) string {
	return strings.NewReplacer("NAME", name, "IMAGE", localcluster.UserImage).Replace(`apiVersion: kubeflow.org/v2beta1
kind: MPIJob
metadata:
  name: NAME
spec:
  slotsPerWorker: 1
  runPolicy:
    cleanPodPolicy: Running
  mpiReplicaSpecs:
    Launcher:
      replicas: 1
      template:
        spec:
          containers:
          - name: launcher
            image: IMAGE
            command: ["sh", "-c", "mpirun /usr/local/bin/mpi-hello && sleep 15"]
            env:
            - name: OMPI_MCA_plm_rsh_args
              value: "-p 2222"
            resources:
              limits:
                cpu: 200m
                memory: 256Mi
    Worker:
      replicas: 2
      template:
        spec:
          volumes:
          - name: scratch
            emptyDir: {}
          containers:
          - name: worker
            image: IMAGE
            env:
            - name: DATASET
              value: /scratch/data
            volumeMounts:
            - name: scratch
              mountPath: /scratch
            resources:
              limits:
                cpu: 300m
                memory: 300Mi
`)
}

// A legacy MPIJob with its own Worker image converts into namespaced
// objects that a namespace editor (dev-a) runs, with plain `kubectl apply`
// and with `kubectl mpijob create -f`: the legacy images, resources,
// volume, environment (the Launcher's, for mpirun -x) and slots reach the
// pods, the job's runtime ends up
// owned by the job, and nothing is left after delete.
func TestConvertedLegacyJobRunsInANamespace(t *testing.T) {
	t.Parallel()
	c := framework.Get(t)
	ctx := context.Background()
	dir := t.TempDir()
	for _, how := range []string{"kubectl-apply", "create-f"} {
		t.Run(how, func(t *testing.T) {
			name := framework.UniqueName("legacy")
			legacy := filepath.Join(dir, name+".yaml")
			if err := os.WriteFile(legacy, []byte(legacyMPIJob(name)), 0o600); err != nil {
				t.Fatal(err)
			}
			conv := mpijob(t, "dev-a", "team-a", "convert", "-f", legacy)
			expect(t, conv, 0, "TrainingRuntime "+name+" in the job's namespace", "OMPI_MCA_plm_rsh_args")
			if strings.Contains(conv.out, "ClusterTrainingRuntime") {
				t.Fatalf("convert output needs a cluster administrator:\n%s", conv.out)
			}
			t.Cleanup(func() { mpijob(t, "dev-a", "team-a", "delete", name, "--wait=false") })
			switch how {
			case "kubectl-apply":
				if _, err := c.Kubectl(t, "dev-a", "team-a", conv.out, "apply", "-f", "-"); err != nil {
					t.Fatalf("dev-a cannot apply the converted job: %v", err)
				}
			case "create-f":
				out := filepath.Join(dir, name+"-new.yaml")
				if err := os.WriteFile(out, []byte(conv.out), 0o600); err != nil {
					t.Fatal(err)
				}
				expect(t, mpijob(t, "dev-a", "team-a", "create", "-f", out), 0, "created in namespace team-a")
			}
			expect(t, mpijob(t, "dev-a", "team-a", "wait", name, "--for=Running", "--timeout", "3m"), 0)
			workers := c.JobPods(t, "team-a", name, "node")
			if len(workers) != 2 {
				t.Fatalf("%d Worker pods, want 2", len(workers))
			}
			for _, p := range workers {
				ct := p.Spec.Containers[0]
				if ct.Image != localcluster.UserImage {
					t.Errorf("Worker %s runs %s, want the legacy Worker image %s", p.Name, ct.Image, localcluster.UserImage)
				}
				if q := ct.Resources.Limits[corev1.ResourceMemory]; q.String() != "300Mi" {
					t.Errorf("Worker %s memory limit %s, want 300Mi", p.Name, q.String())
				}
				if q := ct.Resources.Limits[corev1.ResourceCPU]; q.String() != "300m" {
					t.Errorf("Worker %s cpu limit %s, want 300m", p.Name, q.String())
				}
				if !hasMount(p, "scratch", "/scratch") {
					t.Errorf("Worker %s lacks the legacy volume scratch at /scratch: %+v", p.Name, ct.VolumeMounts)
				}
			}
			for _, p := range c.JobPods(t, "team-a", name, "launcher") {
				ct := p.Spec.Containers[0]
				if ct.Image != localcluster.UserImage {
					t.Errorf("Launcher %s runs %s, want %s", p.Name, ct.Image, localcluster.UserImage)
				}
				if q := ct.Resources.Limits[corev1.ResourceMemory]; q.String() != "256Mi" {
					t.Errorf("Launcher %s memory limit %s, want 256Mi", p.Name, q.String())
				}
				// The Workers' variables join the Launcher's (mpirun -x
				// passes them on): Trainer sets no Worker environment.
				if !hasEnv(ct, "DATASET", "/scratch/data") {
					t.Errorf("Launcher %s lacks the legacy Worker env DATASET: %+v", p.Name, ct.Env)
				}
			}
			expect(t, mpijob(t, "dev-a", "team-a", "wait", name, "--for=Succeeded", "--timeout", "3m"), 0, "is Succeeded")
			expect(t, mpijob(t, "dev-a", "team-a", "logs", name), 0, "allreduce over 2 ranks ok")

			// The runtime belongs to the job: given by create -f, adopted by
			// mpijob-manager after kubectl apply.
			tj := &trainer.TrainJob{}
			if err := c.Client.Get(ctx, client.ObjectKey{Namespace: "team-a", Name: name}, tj); err != nil {
				t.Fatal(err)
			}
			err := wait.PollUntilContextTimeout(ctx, time.Second, time.Minute, true, func(ctx context.Context) (bool, error) {
				rt := &trainer.TrainingRuntime{}
				if err := c.Client.Get(ctx, client.ObjectKey{Namespace: "team-a", Name: name}, rt); err != nil {
					return false, err
				}
				return len(rt.OwnerReferences) == 1 && rt.OwnerReferences[0].UID == tj.UID, nil
			})
			if err != nil {
				t.Errorf("the job's runtime is not owned by the job: %v", err)
			}
			expect(t, mpijob(t, "dev-a", "team-a", "delete", name), 0)
			noRuntime(t, "team-a", name)
		})
	}
}

func hasEnv(ct corev1.Container, name, value string) bool {
	for _, e := range ct.Env {
		if e.Name == name && e.Value == value {
			return true
		}
	}
	return false
}

func hasMount(p corev1.Pod, volume, path string) bool {
	found := false
	for _, v := range p.Spec.Volumes {
		found = found || (v.Name == volume && v.EmptyDir != nil)
	}
	for _, m := range p.Spec.Containers[0].VolumeMounts {
		if found && m.Name == volume && m.MountPath == path {
			return true
		}
	}
	return false
}
