package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"

	"github.com/mpijob/mpijob/pkg/dataconn"
	"github.com/mpijob/mpijob/pkg/jobspec"
	"github.com/mpijob/mpijob/pkg/jobview"
	"github.com/mpijob/mpijob/pkg/logs"
	"github.com/mpijob/mpijob/pkg/registry"
	"github.com/mpijob/mpijob/pkg/runtimes"
)

// jobFlags are the job settings create and clone share; they fill a
// jobspec.Input, the same the SDK and the dashboard build jobs from.
type jobFlags struct {
	workers, slots                                   int32
	runtime, queue                                   string
	image, workerImage, launcherImage                string
	gpus                                             int64
	cpu, memory, launcherCPU, launcher               string
	resources, env, nodeSelector                     []string
	envFromSecret, dataConnections, pvcs, configMaps []string
	timeout, priority, description, launcherFlags    string
	endStuckAfter, gracePeriod, serviceAccount       string
	resumeFrom                                       string
	registerModel, registerArtifact                  string
	retries                                          int32
	tolerations, pullSecrets                         []string
	// warnings are what input found worth saying without refusing (an
	// --env value that looks like a secret); create and clone print them.
	warnings []string
}

func (f *jobFlags) add(fs *pflag.FlagSet, defaults bool) {
	runtimeDefault := ""
	if defaults {
		runtimeDefault = jobspec.DefaultRuntime
	}
	fs.Int32Var(&f.workers, "workers", 0, "number of Workers (the pods that host the ranks, besides the Launcher)")
	fs.Int32Var(&f.slots, "slots-per-worker", 0, "MPI ranks per Worker (default: the runtime's; typically the GPUs per Worker)")
	fs.StringVar(&f.runtime, "runtime", runtimeDefault, "MPI runtime (kubectl mpijob runtimes list)")
	fs.StringVar(&f.image, "image", "", "image of the Launcher and the Workers (default: the runtime's)")
	fs.StringVar(&f.workerImage, "worker-image", "", "image of the Workers only (default: --image, else the runtime's)")
	fs.StringVar(&f.launcherImage, "launcher-image", "", "image of the Launcher only (default: --image, else the runtime's)")
	fs.Int64Var(&f.gpus, "gpus", 0, "nvidia.com/gpu per Worker (0 removes the runtime's GPUs)")
	fs.StringVar(&f.cpu, "cpu", "", "CPU per Worker, e.g. 4 or 500m (request and limit)")
	fs.StringVar(&f.memory, "memory", "", "memory per Worker, e.g. 16Gi (request and limit)")
	fs.StringArrayVar(&f.resources, "resource", nil, "another resource per Worker, NAME=COUNT, e.g. amd.com/gpu=1 (repeatable)")
	fs.StringVar(&f.launcherCPU, "launcher-cpu", "", "CPU of the Launcher")
	fs.StringVar(&f.launcher, "launcher-memory", "", "memory of the Launcher")
	fs.StringArrayVar(&f.env, "env", nil, "environment variable of the Launcher, KEY=VALUE (repeatable; mpirun -x passes it to ranks)")
	fs.StringArrayVar(&f.envFromSecret, "env-from-secret", nil, "environment variable read from a key of a Secret in the job's namespace, KEY=SECRET[:SECRETKEY] (SECRETKEY defaults to KEY; repeatable): the value stays out of the job, which every viewer reads")
	fs.StringArrayVar(&f.nodeSelector, "node-selector", nil, "node label the Launcher and Workers need, key=value (repeatable)")
	fs.StringVar(&f.queue, "queue", "", "Kueue LocalQueue to submit to (the job waits Queued until it fits whole)")
	fs.StringArrayVar(&f.dataConnections, "data-connection", nil, "S3 data connection (an OpenShift AI connection Secret in the job's namespace) whose keys reach the Launcher and every Worker as Secret references; the first one's as AWS_*, and artifacts go to s3://BUCKET/NAME/ (repeatable)")
	fs.StringArrayVar(&f.pvcs, "pvc", nil, "PersistentVolumeClaim to mount on the Launcher and every Worker, CLAIM[:PATH] (PATH defaults to /mnt/CLAIM; repeatable)")
	fs.StringArrayVar(&f.configMaps, "config-map", nil, "ConfigMap to mount read-only on the Launcher and every Worker, each key a file, NAME[:PATH] (PATH defaults to /config/NAME; repeatable)")
	fs.StringVar(&f.endStuckAfter, "end-stuck-after", "", "end the job when it can never finish (a rank failed while the others wait, an image that cannot be pulled, Workers no node can take) and has said so this long, e.g. 30m, or off (default: the runtime's, 10m on the shipped runtimes)")
	fs.StringVar(&f.gracePeriod, "grace-period", "", fmt.Sprintf("time the ranks have to save a checkpoint and exit when the job is stopped (preempted, suspended, retried, ended): they get SIGTERM first, e.g. 90s, 5m (at most %s; default: the runtime's, 60s on the shipped runtimes)", jobspec.FormatTimeout(jobspec.MaxGracePeriod)))
	fs.StringVar(&f.serviceAccount, "service-account", "", "ServiceAccount of the job's namespace whose token the Launcher and every Worker get (default: none, no token); you must be allowed to create its tokens")
	fs.StringVar(&f.timeout, "timeout", "", "stop the job once it has run this long, e.g. 90m, 2h or 1h30m (reason DeadlineExceeded; default: no limit)")
	fs.Int32Var(&f.retries, "retries", 0, fmt.Sprintf("start the whole job again after a failure, up to this many times (0-%d): every Worker and the Launcher anew; a program that checkpoints resumes from its last checkpoint in $MPIJOB_CHECKPOINT_URI", jobspec.MaxRetries))
	fs.StringVar(&f.resumeFrom, "resume-from", "", "start from another job's last checkpoint when this job has none of its own yet: that job's name, or its checkpoint folder s3://BUCKET/PATH/ or file:///PATH/ (needs --data-connection or --pvc; the program reads $MPIJOB_RESUME_FROM)")
	fs.StringVar(&f.priority, "priority", "", "Kueue WorkloadPriorityClass of the job, with --queue (kubectl get workloadpriorityclasses)")
	fs.StringArrayVar(&f.tolerations, "toleration", nil, "taint the Launcher and Workers tolerate, KEY[=VALUE][:EFFECT], e.g. dedicated=mpi:NoSchedule (no value: any value; no effect: every effect; repeatable)")
	fs.StringArrayVar(&f.pullSecrets, "image-pull-secret", nil, "Secret of the job's namespace to pull the images with (repeatable)")
	fs.StringVar(&f.description, "description", "", fmt.Sprintf("a line about the job, shown by describe and the dashboard (at most %d characters)", jobspec.MaxDescription))
	fs.StringVar(&f.registerModel, "register-model", "", "register the job's model in the model registry when the job succeeds, NAME[:VERSION] (VERSION defaults to the job's name; needs --data-connection; the administrator names the registry): a registration that fails leaves the job Succeeded with a warning that gives the command to register it later")
	fs.StringVar(&f.registerArtifact, "register-artifact", "", "the model file to register with --register-model when the job writes more than one (default: its one model.* file)")
	fs.StringVar(&f.launcherFlags, "launcher-flags", "", `flags for mpirun (or mpiexec) before the program, split at spaces, e.g. "--bind-to none" (added to the command, or to the runtime's)`)
}

var jobFlagNames = []string{"workers", "slots-per-worker", "runtime", "image", "worker-image", "launcher-image", "gpus", "cpu", "memory", "resource", "launcher-cpu", "launcher-memory", "env", "env-from-secret", "node-selector", "queue", "data-connection", "pvc", "config-map",
	"timeout", "end-stuck-after", "grace-period", "service-account", "retries", "resume-from", "priority", "toleration", "image-pull-secret", "description", "launcher-flags", "register-model", "register-artifact"}

// input sets on in what the given flags say.
func (f *jobFlags) input(in *jobspec.Input, changed func(string) bool) error {
	if changed("workers") {
		in.Workers = f.workers
	}
	if changed("slots-per-worker") {
		if f.slots < 1 {
			return usageErr("--slots-per-worker %d: use 1 or more (MPI ranks per Worker)", f.slots)
		}
		in.SlotsPerWorker = f.slots
	}
	if changed("runtime") {
		if strings.TrimSpace(f.runtime) == "" {
			return usageErr("--runtime is empty: name an MPI runtime, e.g. --runtime %s (kubectl mpijob runtimes list)", jobspec.DefaultRuntime)
		}
		in.Runtime = f.runtime
	}
	for flag, dst := range map[string]*string{"image": &in.Image, "worker-image": &in.WorkerImage, "launcher-image": &in.LauncherImage} {
		if !changed(flag) {
			continue
		}
		v := map[string]string{"image": f.image, "worker-image": f.workerImage, "launcher-image": f.launcherImage}[flag]
		if strings.TrimSpace(v) == "" {
			return usageErr("--%s is empty: give an image reference, e.g. ghcr.io/mpijob/openmpi:4.1", flag)
		}
		*dst = v
	}
	if changed("image") {
		// A new --image is for both sides unless one is set on its own.
		if !changed("worker-image") {
			in.WorkerImage = ""
		}
		if !changed("launcher-image") {
			in.LauncherImage = ""
		}
	}
	set := func(m *map[string]string, k, v string) {
		if *m == nil {
			*m = map[string]string{}
		}
		(*m)[k] = v
	}
	if changed("gpus") {
		if f.gpus < 0 {
			return usageErr("--gpus %d: use 0 or more", f.gpus)
		}
		set(&in.ResourcesPerWorker, "nvidia.com/gpu", strconv.FormatInt(f.gpus, 10))
	}
	for flag, kv := range map[string][2]string{"cpu": {"cpu", f.cpu}, "memory": {"memory", f.memory}} {
		if changed(flag) {
			set(&in.ResourcesPerWorker, kv[0], kv[1])
		}
	}
	for _, kv := range f.resources {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return usageErr("--resource %q: use NAME=COUNT, e.g. amd.com/gpu=1", kv)
		}
		set(&in.ResourcesPerWorker, k, v)
	}
	for flag, kv := range map[string][2]string{"launcher-cpu": {"cpu", f.launcherCPU}, "launcher-memory": {"memory", f.launcher}} {
		if changed(flag) {
			set(&in.LauncherResources, kv[0], kv[1])
		}
	}
	for _, kv := range f.env {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return usageErr("--env %q: use KEY=VALUE", kv)
		}
		in.Env = setEnvVar(in.Env, corev1.EnvVar{Name: k, Value: v})
		if r := (logs.Redactor{}); r.Line(kv) != kv || r.Count > 0 {
			f.warnings = append(f.warnings, fmt.Sprintf("--env %s: the value looks like a secret, and every viewer of the job reads it; put it in a Secret and use --env-from-secret %s=SECRET:KEY (kubectl create secret generic SECRET --from-literal=KEY=...)", k, k))
		}
	}
	for _, kv := range f.envFromSecret {
		k, ref, ok := strings.Cut(kv, "=")
		secret, key, _ := strings.Cut(ref, ":")
		if !ok || k == "" || secret == "" {
			return usageErr("--env-from-secret %q: use KEY=SECRET or KEY=SECRET:SECRETKEY, e.g. AWS_SECRET_ACCESS_KEY=s3-credentials:secret-key", kv)
		}
		if key == "" {
			key = k
		}
		in.Env = setEnvVar(in.Env, corev1.EnvVar{Name: k, ValueFrom: &corev1.EnvVarSource{
			SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: secret}, Key: key}}})
	}
	if changed("node-selector") {
		in.NodeSelector = map[string]string{}
		for _, kv := range f.nodeSelector {
			k, v, ok := strings.Cut(kv, "=")
			if !ok || k == "" {
				return usageErr("--node-selector %q: use key=value, e.g. nvidia.com/gpu.product=A100", kv)
			}
			in.NodeSelector[k] = v
		}
	}
	if changed("queue") {
		in.Queue = f.queue
	}
	if changed("data-connection") {
		in.DataConnections = nil
		for _, c := range f.dataConnections {
			if strings.TrimSpace(c) == "" {
				return usageErr("--data-connection is empty: name a data connection, e.g. --data-connection local-s3 (kubectl get secrets -l %s=true)", dataconn.DashboardLabel)
			}
			in.DataConnections = append(in.DataConnections, c)
		}
	}
	if changed("pvc") {
		in.PVCs = nil
		for _, v := range f.pvcs {
			claim, path, err := mountFlag("--pvc", "CLAIM", "results:/mnt/results", v)
			if err != nil {
				return err
			}
			in.PVCs = append(in.PVCs, dataconn.PVC{Claim: claim, MountPath: path})
		}
	}
	if err := f.scheduling(in, changed); err != nil {
		return err
	}
	if changed("config-map") {
		in.ConfigMaps = nil
		for _, v := range f.configMaps {
			name, path, err := mountFlag("--config-map", "NAME", "train-config:/mnt/config", v)
			if err != nil {
				return err
			}
			in.ConfigMaps = append(in.ConfigMaps, dataconn.ConfigMap{Name: name, MountPath: path})
		}
	}
	return nil
}

// scheduling sets the timeout, retries, priority, tolerations, image pull
// Secrets, description and launcher flags the given flags say.
func (f *jobFlags) scheduling(in *jobspec.Input, changed func(string) bool) error {
	if changed("timeout") {
		in.Timeout = strings.TrimSpace(f.timeout)
	}
	if changed("end-stuck-after") {
		in.EndStuckAfter = strings.TrimSpace(f.endStuckAfter)
	}
	if changed("service-account") {
		in.ServiceAccount = strings.TrimSpace(f.serviceAccount)
	}
	if changed("grace-period") {
		in.GracePeriod = strings.TrimSpace(f.gracePeriod)
	}
	if changed("retries") {
		in.Retries = f.retries
	}
	if changed("resume-from") {
		in.ResumeFrom = strings.TrimSpace(f.resumeFrom)
	}
	if changed("priority") {
		in.Priority = strings.TrimSpace(f.priority)
	}
	if changed("description") {
		in.Description = f.description
	}
	if changed("register-model") {
		in.RegisterModel = strings.TrimSpace(f.registerModel)
		if in.RegisterModel != "" {
			version := in.Name
			if version == "" {
				version = "v1"
			}
			if _, err := registry.ParseRef("--register-model", in.RegisterModel, version); err != nil {
				return usageErr("%v", err)
			}
		}
	}
	if changed("register-artifact") {
		in.RegisterArtifact = strings.TrimSpace(f.registerArtifact)
	}
	if changed("toleration") {
		in.Tolerations = nil
		for _, v := range f.tolerations {
			if strings.TrimSpace(v) == "" {
				return usageErr("--toleration is empty: use KEY[=VALUE][:EFFECT], e.g. --toleration dedicated=mpi:NoSchedule")
			}
			t, err := jobspec.ParseToleration(v)
			if err != nil {
				return usageErr("--toleration %s", err)
			}
			in.Tolerations = append(in.Tolerations, t)
		}
	}
	if changed("image-pull-secret") {
		in.ImagePullSecrets = nil
		for _, v := range f.pullSecrets {
			if strings.TrimSpace(v) == "" {
				return usageErr("--image-pull-secret is empty: name a Secret of the job's namespace, e.g. --image-pull-secret registry-creds")
			}
			in.ImagePullSecrets = append(in.ImagePullSecrets, v)
		}
	}
	if changed("launcher-flags") {
		in.LauncherFlags = strings.Fields(f.launcherFlags)
	}
	return nil
}

// mountFlag reads a NAME[:PATH] flag value.
func mountFlag(flag, what, example, v string) (name, path string, err error) {
	name, path, _ = strings.Cut(v, ":")
	if name == "" {
		return "", "", usageErr("%s %q: use %s or %s:/mount/path, e.g. %s %s", flag, v, what, what, flag, example)
	}
	return name, path, nil
}

func (f *jobFlags) printWarnings(w io.Writer) {
	for _, msg := range f.warnings {
		fmt.Fprintln(w, "Warning:", msg)
	}
}

func setEnvVar(env []corev1.EnvVar, e corev1.EnvVar) []corev1.EnvVar {
	out := append([]corev1.EnvVar(nil), env...)
	for i := range out {
		if out[i].Name == e.Name {
			out[i] = e
			return out
		}
	}
	return append(out, e)
}

// flagOf names the flag (or argument) of a jobspec.Input field.
func flagOf(field string) string {
	res, name, _ := strings.Cut(field, ".")
	switch res {
	case "name":
		return "NAME"
	case "command":
		return "COMMAND"
	case "data_connections":
		return "--data-connection"
	case "pvcs":
		return "--pvc"
	case "config_maps":
		return "--config-map"
	case "tolerations":
		return "--toleration"
	case "image_pull_secrets":
		return "--image-pull-secret"
	case "resources_per_worker":
		switch name {
		case "cpu", "memory":
			return "--" + name
		case "nvidia.com/gpu":
			return "--gpus"
		}
		return "--resource " + name
	case "launcher_resources":
		if name == "" {
			return "--launcher-cpu/--launcher-memory"
		}
		return "--launcher-" + name
	}
	return "--" + strings.ReplaceAll(res, "_", "-")
}

// buildErr turns a builder error into a usage error that names the flag.
func buildErr(err error) error {
	var e *jobspec.Error
	if !errors.As(err, &e) {
		return err
	}
	if e.Value == "" {
		return usageErr("%s: %s", flagOf(e.Field), e.Problem)
	}
	return usageErr("%s %q: %s", flagOf(e.Field), e.Value, e.Problem)
}

// baseRuntime gets the MPI runtime a job in namespace ns picks by name:
// a ClusterTrainingRuntime, or the namespace's own TrainingRuntime
// (runtimes.FindBase), with "did you mean".
func (c *clients) baseRuntime(ctx context.Context, ns, name string) (*trainer.ClusterTrainingRuntime, error) {
	return c.baseRuntimeOfKind(ctx, ns, name, "")
}

// baseRuntimeOfKind is baseRuntime of one kind ("" either:
// runtimes.FindBaseOfKind).
func (c *clients) baseRuntimeOfKind(ctx context.Context, ns, name, kind string) (*trainer.ClusterTrainingRuntime, error) {
	rt, err := runtimes.FindBaseOfKind(ctx, c, ns, name, kind)
	if err != nil {
		return nil, c.unknownRuntime(ctx, name, err)
	}
	if !runtimes.IsMPI(&rt.Spec) {
		return nil, usageErr("runtime %s has no MPI policy: it is not an MPI runtime (kubectl mpijob runtimes list shows them)", name)
	}
	return rt, nil
}

// createJob creates a job's objects (jobspec.Create); a name that is
// taken is a usage error.
func (c *clients) createJob(ctx context.Context, job *jobspec.Job, serverDryRun bool) error {
	err := jobspec.Create(ctx, c, job, serverDryRun)
	var taken *jobspec.NameTakenError
	if errors.As(err, &taken) {
		return usageErr("%s", taken.Error())
	}
	return err
}

// describeResources writes a resource list as describe does:
// cpu=2,memory=8Gi ("-" for none).
func describeResources(rl corev1.ResourceList) string {
	return describeWords(jobview.Quantities(rl))
}

// describeWords is describeResources of a list already in words
// (jobview.Quantities), by name.
func describeWords(rl map[string]string) string {
	if len(rl) == 0 {
		return "-"
	}
	parts := make([]string, 0, len(rl))
	for _, k := range slices.Sorted(maps.Keys(rl)) {
		parts = append(parts, k+"="+rl[k])
	}
	return strings.Join(parts, ",")
}
