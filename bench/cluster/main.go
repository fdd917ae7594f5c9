// Command cluster measures the local cluster: time to come up (warm cache),
// time from TrainJob creation to Complete for a real 2-Worker MPI job and a
// 64-Worker kwok GPU job, resident memory, and time to tear down. It prints
// a table with each number against its budget.
//
//	sudo go run ./bench/cluster
//
// It needs root and no running local cluster; it stops the cluster it starts.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"text/tabwriter"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mpijob/mpijob/pkg/localcluster"
)

type row struct {
	what   string
	got    float64
	budget float64
	unit   string
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

func run() error {
	ctx := context.Background()
	wd, _ := os.Getwd()
	opts, err := localcluster.DefaultOptions(wd)
	if err != nil {
		return err
	}
	if ok, _ := localcluster.Status(ctx, opts); ok {
		return fmt.Errorf("a local cluster runs already: stop it with `make dev-down` first")
	}
	var rows []row

	start := time.Now()
	c := localcluster.New(opts, io.Discard)
	if err := c.Up(ctx); err != nil {
		_ = localcluster.Down(ctx, opts, io.Discard)
		return err
	}
	if err := c.Finish(ctx); err != nil {
		_ = localcluster.Down(ctx, opts, io.Discard)
		return err
	}
	rows = append(rows, row{"cluster up (warm cache)", time.Since(start).Seconds(), 60, "s"})
	defer func() { _ = localcluster.Down(ctx, opts, io.Discard) }()

	cfg, err := clientcmd.BuildConfigFromFlags("", opts.KubeconfigPath())
	if err != nil {
		return err
	}
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = trainer.AddToScheme(scheme)
	cl, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return err
	}

	d, err := timeJob(ctx, cl, job("bench-mpi", "mpi-openmpi", 2, false))
	if err != nil {
		return err
	}
	rows = append(rows, row{"2-Worker OpenMPI job, create to Complete", d.Seconds(), 0, "s"})
	d, err = timeJob(ctx, cl, job("bench-kwok", "mpi-openmpi-gpu", 65, true))
	if err != nil {
		return err
	}
	rows = append(rows, row{"64-Worker kwok GPU job, create to Complete", d.Seconds(), 0, "s"})

	_, total := localcluster.Memory(opts)
	rows = append(rows, row{"cluster resident memory", float64(total) / (1 << 20), 2048, "MiB"})

	start = time.Now()
	if err := localcluster.Down(ctx, opts, io.Discard); err != nil {
		return err
	}
	rows = append(rows, row{"cluster down", time.Since(start).Seconds(), 0, "s"})

	w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "MEASURE\tVALUE\tBUDGET\tVALUE/BUDGET\t")
	for _, r := range rows {
		budget, ratio := "-", "-"
		if r.budget > 0 {
			budget = fmt.Sprintf("%.0f %s", r.budget, r.unit)
			ratio = fmt.Sprintf("%.2f", r.got/r.budget)
		}
		fmt.Fprintf(w, "%s\t%.1f %s\t%s\t%s\t\n", r.what, r.got, r.unit, budget, ratio)
	}
	return w.Flush()
}

func job(name, runtimeName string, numNodes int32, kwok bool) *trainer.TrainJob {
	tj := &trainer.TrainJob{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: trainer.TrainJobSpec{
			RuntimeRef: trainer.RuntimeRef{Name: runtimeName},
			Trainer:    &trainer.Trainer{NumNodes: ptr.To(numNodes), Command: []string{"mpirun", "/usr/local/bin/mpi-hello"}},
		},
	}
	if kwok {
		one := resource.MustParse("1")
		tj.Spec.Trainer.ResourcesPerNode = &corev1.ResourceRequirements{Limits: corev1.ResourceList{"nvidia.com/gpu": one}}
		spec := &trainer.PodSpecPatch{
			NodeSelector: map[string]string{"type": "kwok"},
			Tolerations:  []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
		}
		var rjobs []trainer.ReplicatedJobPatch
		for _, n := range []string{"launcher", "node"} {
			rjobs = append(rjobs, trainer.ReplicatedJobPatch{Name: n, Template: &trainer.JobTemplatePatch{Spec: &trainer.JobSpecPatch{Template: &trainer.PodTemplatePatch{Spec: spec}}}})
		}
		tj.Spec.RuntimePatches = []trainer.RuntimePatch{{Manager: "mpijob.dev/bench", TrainingRuntimeSpec: &trainer.TrainingRuntimeSpecPatch{
			Template: &trainer.JobSetTemplatePatch{Spec: &trainer.JobSetSpecPatch{ReplicatedJobs: rjobs}},
		}}}
	}
	return tj
}

// timeJob creates tj and returns how long it took to turn Complete.
func timeJob(ctx context.Context, cl client.Client, tj *trainer.TrainJob) (time.Duration, error) {
	start := time.Now()
	if err := cl.Create(ctx, tj); err != nil {
		return 0, fmt.Errorf("failed to create %s: %w", tj.Name, err)
	}
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		got := &trainer.TrainJob{}
		if err := cl.Get(ctx, client.ObjectKeyFromObject(tj), got); err != nil {
			return false, nil //nolint:nilerr // keep polling through transient errors
		}
		for _, c := range got.Status.Conditions {
			if c.Status == metav1.ConditionTrue && c.Type == trainer.TrainJobFailed {
				return false, fmt.Errorf("%s failed: %s", tj.Name, c.Message)
			}
			if c.Status == metav1.ConditionTrue && c.Type == trainer.TrainJobComplete {
				return true, nil
			}
		}
		return false, nil
	})
	return time.Since(start), err
}
