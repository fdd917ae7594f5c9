package jobview

import (
	"fmt"
	"strings"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/mpijob/mpijob/pkg/api"
	"github.com/mpijob/mpijob/pkg/dataconn"
	"github.com/mpijob/mpijob/pkg/jobspec"
	"github.com/mpijob/mpijob/pkg/logs"
	"github.com/mpijob/mpijob/pkg/runtimes"
)

// Known is what a caller read of one job: the job, its pods, its runtime
// and mpijob-manager's state. DetailOf turns it into everything an
// interface shows; reading is the caller's (the CLI as its user, the
// dashboard as its user), deciding is DetailOf's.
type Known struct {
	Job *trainer.TrainJob
	// Pods are the job's pods there now.
	Pods []corev1.Pod
	// Runtime is the spec of the job's runtime, nil when it was not read;
	// RuntimeAnnotations are its annotations (its policy), RuntimeError
	// why it could not be read ("" when it was, or was not asked for).
	Runtime            *trainer.TrainingRuntimeSpec
	RuntimeAnnotations map[string]string
	RuntimeError       string
	// Manager is mpijob-manager's state (nil: unknown, no stale note).
	Manager *api.ManagerState
	Now     time.Time
}

// Detail is one job as its page shows it (describe, the dashboard's job
// page): everything but its Events, which each interface reads as its user.
type Detail struct {
	Job       Job        `json:"job"`
	Pods      []Pod      `json:"pods"`
	Resources *Resources `json:"resources,omitempty"`
	// RuntimeKind is ClusterTrainingRuntime, or TrainingRuntime for a
	// per-job runtime; RuntimeCopy names that per-job copy ("" when the
	// job runs on the runtime it chose).
	RuntimeKind string `json:"runtimeKind"`
	RuntimeCopy string `json:"runtimeCopy,omitempty"`
	// RuntimeError is why the runtime could not be read: no resources,
	// storage or policy are known then.
	RuntimeError string `json:"runtimeError,omitempty"`
	// StaleNote says, while mpijob-manager is not running, that the status
	// may be stale and how old it is (the CLI's and the SDK's words).
	StaleNote string `json:"staleNote,omitempty"`
	// History is the job's transitions as its status kept them: what its
	// Events said, after the cluster's Events expired.
	History []api.Transition `json:"history,omitempty"`
	// Settings are what the job's creator set beyond its shape
	// (description, priority, timeout, retries).
	Settings Settings `json:"settings"`
	// ProgressLine is the last progress report in one line ("step 40/100
	// (40%), about 2 minutes left"), Metrics its training metrics
	// ("loss 0.1234"); empty when the ranks report none.
	ProgressLine string `json:"progressLine,omitempty"`
	// ResumedLine says where the program took up again from a checkpoint
	// ("resumed from epoch 12 of 30 (checkpoint written 4 minutes
	// earlier)"); AttemptsLine how often the job started again ("retry 1
	// of 3, preempted once"). Empty for a first run from its first step.
	ResumedLine  string   `json:"resumedLine,omitempty"`
	AttemptsLine string   `json:"attemptsLine,omitempty"`
	Metrics      []string `json:"metrics,omitempty"`
	// DataConnections, PVCs and ConfigMaps are what the job mounts.
	DataConnections []string `json:"dataConnections,omitempty"`
	PVCs            []Mount  `json:"pvcs,omitempty"`
	ConfigMaps      []Mount  `json:"configMaps,omitempty"`
	// Command is the command the ranks run, and Env the variables the job
	// sets, redacted as logs are (a command or a variable can carry an
	// access key).
	Command string   `json:"command,omitempty"`
	Env     []string `json:"env,omitempty"`
	// Policy is the runtime's policy in lines ("max workers per job: 8").
	Policy []string `json:"policy,omitempty"`
	// YAML is the TrainJob as kubectl shows it, without managed fields.
	YAML string `json:"yaml"`
	// Status is the manager's status of the job (the zero Status when it
	// has written none), which vouches for its Events.
	Status api.Status `json:"-"`
}

// Mount is a PVC or a ConfigMap and where the ranks see it.
type Mount struct {
	Name string `json:"name"`
	Path string `json:"path"`
}

// DetailOf is everything an interface shows of the job k holds.
func DetailOf(k Known) Detail {
	tj := k.Job
	st, ok := api.StatusOf(tj)
	d := Detail{
		Job:          JobWith(tj, st, ok),
		RuntimeKind:  ptr.Deref(tj.Spec.RuntimeRef.Kind, trainer.ClusterTrainingRuntimeKind),
		RuntimeError: k.RuntimeError,
		Settings:     SettingsOf(tj, k.Runtime),
	}
	if ok {
		d.Status, d.History = st, st.History
		if st.Resumed != nil {
			d.ResumedLine = st.Resumed.Text()
		}
		if st.Attempts != nil {
			d.AttemptsLine = st.Attempts.Text()
		}
		if k.Manager != nil {
			d.StaleNote = k.Manager.StaleNote(st.ObservedTime, k.Now)
		}
	}
	if base := d.Job.Runtime; base != tj.Spec.RuntimeRef.Name {
		d.RuntimeCopy = tj.Spec.RuntimeRef.Name
	}
	d.Pods = Pods(k.Pods, d.Status, d.Job.WorkersTotal)
	if p := d.Job.Progress; p != nil {
		d.ProgressLine = p.Short()
		if left := p.EstimatedRemainingTimeSummary; left != "" && left != "complete" {
			d.ProgressLine += ", about " + left + " left"
		}
		for _, m := range p.Metrics() {
			d.Metrics = append(d.Metrics, fmt.Sprintf("%s %.4g", m, p.TrainMetrics[m]))
		}
	}
	if spec := k.Runtime; spec != nil {
		d.Job.MPI = d.Job.MPI || runtimes.IsMPI(spec)
		if shape, err := runtimes.ShapeOf(tj, spec); err == nil {
			d.Resources = ResourcesOf(shape)
		}
		conns, pvcs := jobspec.StorageOf(spec)
		d.DataConnections = conns
		for _, p := range pvcs {
			d.PVCs = append(d.PVCs, Mount{Name: p.Claim, Path: dataconn.MountPathOf(p)})
		}
		for _, c := range jobspec.ConfigMapsOf(spec) {
			d.ConfigMaps = append(d.ConfigMaps, Mount{Name: c.Name, Path: dataconn.ConfigMapPathOf(c)})
		}
		if pol, errs := runtimes.ParsePolicy(k.RuntimeAnnotations); len(errs) == 0 {
			// The job's own timeouts win over its runtime's.
			pol.ProgressTimeout = runtimes.ProgressTimeoutOf(k.RuntimeAnnotations, tj.Annotations)
			pol.EndStuckAfter = runtimes.EndStuckAfterOf(k.RuntimeAnnotations, tj.Annotations)
			d.Policy = PolicyLines(pol)
		}
	}
	if tr := tj.Spec.Trainer; tr != nil {
		if len(tr.Command) > 0 {
			d.Command, _ = logs.String(strings.Join(append(append([]string{}, tr.Command...), tr.Args...), " "))
		}
		for _, e := range tr.Env {
			d.Env = append(d.Env, EnvLine(e))
		}
	}
	clean := tj.DeepCopy()
	clean.ManagedFields = nil
	clean.APIVersion, clean.Kind = trainer.GroupVersion.String(), trainer.TrainJobKind
	if b, err := yaml.Marshal(clean); err == nil {
		d.YAML = string(b)
	}
	return d
}

// Stores says whether the job mounts storage its artifacts are read from.
func (d Detail) Stores() bool { return len(d.DataConnections) > 0 || len(d.PVCs) > 0 }

// PolicyLines is a runtime's policy in lines, as describe and the job page
// show it.
func PolicyLines(p runtimes.Policy) []string {
	var out []string
	if p.MaxWorkers > 0 {
		out = append(out, fmt.Sprintf("max workers per job: %d", p.MaxWorkers))
	}
	if p.MaxGPUsPerWorker != nil {
		out = append(out, fmt.Sprintf("max GPUs per worker: %s", p.MaxGPUsPerWorker.String()))
	}
	if len(p.RequiredNodeSelector) > 0 {
		out = append(out, fmt.Sprintf("required node labels: %v", p.RequiredNodeSelector))
	}
	if len(p.RequiredTolerations) > 0 {
		tols := make([]string, 0, len(p.RequiredTolerations))
		for _, t := range p.RequiredTolerations {
			tols = append(tols, runtimes.FormatToleration(t))
		}
		out = append(out, "required tolerations: "+strings.Join(tols, ","))
	}
	if p.GangTimeout > 0 {
		out = append(out, fmt.Sprintf("gang-scheduling timeout: %s", p.GangTimeout))
	}
	if p.ProgressTimeout > 0 {
		out = append(out, fmt.Sprintf("progress timeout: %s (a warning when the Launcher prints nothing for longer)", p.ProgressTimeout))
	}
	if p.EndStuckAfter > 0 {
		out = append(out, fmt.Sprintf("ended when it can never finish, after: %s", p.EndStuckAfter))
	}
	return out
}

// EnvLine is a variable as NAME=VALUE with the value redacted as logs are,
// or where it comes from.
func EnvLine(e corev1.EnvVar) string {
	switch {
	case e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil:
		return fmt.Sprintf("%s from Secret %s, key %s", e.Name, e.ValueFrom.SecretKeyRef.Name, e.ValueFrom.SecretKeyRef.Key)
	case e.ValueFrom != nil:
		return e.Name + " from a reference (valueFrom)"
	}
	line, _ := logs.String(e.Name + "=" + e.Value)
	return line
}

// FailedLine names a failed Launcher or Worker with why it failed and how
// it ended: "worker-1 (WorkerOOMKilled; exit code 137, SIGKILL)".
func FailedLine(f api.FailedPod) string {
	why := f.Reason
	if ended := f.Ended(); ended != "" {
		// A pod's state in words (api.PodState) ends with the same exit
		// code: "Error (exit 1)". It is said once.
		why = strings.TrimSuffix(why, fmt.Sprintf(" (exit %d)", *f.ExitCode)) + "; " + ended
	} else if f.Signal != 0 {
		why += "; " + api.SignalName(f.Signal)
	}
	return fmt.Sprintf("%s (%s)", PodLabel(f.Role, int(f.Index)), why)
}

// PodLabel names a Launcher or Worker as logs --all does: launcher,
// worker-N.
func PodLabel(role string, index int) string {
	if role == "launcher" {
		return "launcher"
	}
	return fmt.Sprintf("worker-%d", index)
}
