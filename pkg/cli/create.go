package cli

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	"sigs.k8s.io/yaml"

	"github.com/mpijob/mpijob/pkg/api"
	"github.com/mpijob/mpijob/pkg/jobspec"
	"github.com/mpijob/mpijob/pkg/runtimes"
)

// createOptions is `kubectl mpijob create`: Complete reads the arguments
// and flags into a jobspec.Input (or the file), Validate checks what needs
// no cluster, Run builds against the real runtime and creates.
type createOptions struct {
	*Options
	jobFlags
	file   string
	dryRun string
	output string

	in        jobspec.Input
	fromFlags bool
	job       *jobspec.Job
}

func newCreateCommand(o *Options) *cobra.Command {
	c := &createOptions{Options: o}
	cmd := &cobra.Command{
		Use:   "create NAME --workers N [flags] -- COMMAND [ARGS...] | create -f job.yaml",
		Short: "Create an MPI job",
		Long: `Create an MPI job: a Launcher that runs COMMAND (default: the runtime's) and
N Workers that host the ranks, with --slots-per-worker ranks each.`,
		Example: `  # 2 Workers, 2 slots each, the runtime's test program
  kubectl mpijob create hello --workers 2 --slots-per-worker 2

  # 4 GPU Workers with 8 GPUs each, through the Kueue queue "default"
  kubectl mpijob create train --runtime mpi-openmpi-gpu --workers 4 --gpus 8 --queue default \
    --image registry.example.com/train:1 -- mpirun python3 train.py

  # from a manifest
  kubectl mpijob create -f job.yaml`,
		ValidArgsFunction: cobra.NoFileCompletions,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := c.Complete(args, cmd.ArgsLenAtDash(), cmd.Flags().Changed); err != nil {
				return err
			}
			if err := c.Validate(); err != nil {
				return err
			}
			return c.Run(cmd.Context())
		},
	}
	c.add(cmd.Flags(), true)
	cmd.Flags().StringVarP(&c.file, "filename", "f", "", "TrainJob manifest to create, with its per-job TrainingRuntime if any (- for stdin)")
	cmd.Flags().StringVar(&c.dryRun, "dry-run", "none", `"client" prints the job, "server" has the cluster check it (admission included) without creating it and says whether the cluster can place it now (free capacity and GPUs, its Kueue queue position and estimated start)`)
	cmd.Flags().Lookup("dry-run").NoOptDefVal = "client"
	cmd.Flags().StringVarP(&c.output, "output", "o", "", "print the created job as yaml or json")
	_ = cmd.RegisterFlagCompletionFunc("runtime", o.completeRuntimes)
	return cmd
}

// Complete reads NAME, the command after -- and the job flags into an
// Input, or the job from -f.
func (c *createOptions) Complete(args []string, dash int, changed func(string) bool) error {
	if c.dryRun != "none" && c.dryRun != "client" && c.dryRun != "server" {
		return usageErr("--dry-run %q: use client or server", c.dryRun)
	}
	if c.output != "" && c.output != "yaml" && c.output != "json" {
		return usageErr("--output %q: use yaml or json", c.output)
	}
	if c.file != "" {
		if len(args) > 0 || anyFlag(changed, jobFlagNames...) {
			return usageErr("-f takes the whole job from the file: give no NAME, COMMAND or job flags with it")
		}
		job, err := readJobFile(c.file, c.In)
		if err != nil {
			return err
		}
		c.job = job
		return nil
	}
	if len(args) == 0 || dash == 0 {
		return usageErr("give the job a NAME: kubectl mpijob create NAME --workers N [-- COMMAND ARGS...]")
	}
	name := args[0]
	if dash > 1 || dash < 0 && len(args) > 1 {
		return usageErr("unexpected arguments %q: put the command after --, e.g. create %s --workers 2 -- mpirun python3 train.py", args[1:], name)
	}
	if !changed("workers") {
		return usageErr("--workers is required: how many Workers host the ranks, e.g. --workers 2")
	}
	c.fromFlags = true
	c.in = jobspec.Input{Name: name, Runtime: c.runtime}
	if err := c.input(&c.in, changed); err != nil {
		return err
	}
	if dash >= 0 && len(args) > dash {
		c.in.Command = args[dash:]
	}
	return nil
}

// Validate checks what needs no cluster: the job as built on a stand-in
// runtime.
func (c *createOptions) Validate() error {
	if !c.fromFlags {
		return nil
	}
	if _, err := jobspec.Build(c.in, offlineRuntime(c.in.Runtime)); err != nil {
		return buildErr(err)
	}
	return nil
}

// Run builds the job on its runtime and creates it (or prints it, or has
// the cluster check it).
func (c *createOptions) Run(ctx context.Context) error {
	cl, err := c.clients()
	if err != nil {
		return err
	}
	job := c.job
	if c.fromFlags {
		c.printWarnings(c.ErrOut)
		c.in.Namespace = cl.namespace
		base, err := cl.baseRuntime(ctx, cl.namespace, c.in.Runtime)
		if err != nil {
			return err
		}
		if job, err = jobspec.Build(c.in, base); err != nil {
			return buildErr(err)
		}
		if c.dryRun != "client" {
			if err := jobspec.CheckStorage(ctx, cl, cl.namespace, c.in); err != nil {
				return buildErr(err)
			}
		}
	} else {
		tj := job.TrainJob
		if tj.Namespace == "" || c.Config.Namespace != nil && *c.Config.Namespace != "" {
			tj.Namespace = cl.namespace
		}
		if job.Runtime == nil {
			if err := cl.copyRuntime(ctx, job); err != nil {
				return err
			}
		}
		if job.Runtime == nil {
			if job, err = cl.fitWorkers(ctx, job); err != nil {
				return err
			}
		}
	}
	if c.dryRun == "client" {
		format := c.output
		if format == "" {
			format = "yaml"
		}
		return c.print(job, format)
	}
	if err := cl.createJob(ctx, job, c.dryRun == "server"); err != nil {
		return err
	}
	tj := job.TrainJob
	placed := cl.warnings.Placement()
	if c.output != "" {
		// The printed objects stay valid YAML or JSON: placement goes
		// to stderr.
		printPlacement(c.ErrOut, placed)
		return c.print(job, c.output)
	}
	suffix := ""
	if c.dryRun == "server" {
		suffix = " (server dry run: checked, not created)"
	}
	fmt.Fprintf(c.Out, "mpijob %s created in namespace %s%s\n", tj.Name, tj.Namespace, suffix)
	printPlacement(c.Out, placed)
	if c.dryRun != "server" {
		fmt.Fprintf(c.Out, "Follow it: kubectl mpijob wait %s -n %s --for=Running && kubectl mpijob logs %s -n %s --all\n", tj.Name, tj.Namespace, tj.Name, tj.Namespace)
	}
	return nil
}

// printPlacement writes what a server dry run said of whether the cluster
// can place the job now (nothing when it said nothing: an older manager).
func printPlacement(out io.Writer, lines []string) {
	if len(lines) == 0 {
		return
	}
	fmt.Fprintln(out, "Can the cluster place it now?")
	for _, l := range lines {
		fmt.Fprintf(out, "  %s\n", l)
	}
}

// offlineRuntime is a stand-in MPI runtime for checking the flags before
// the cluster is asked for the real one.
func offlineRuntime(name string) *trainer.ClusterTrainingRuntime {
	rt := &trainer.ClusterTrainingRuntime{}
	rt.Name = name
	rt.Spec.MLPolicy = &trainer.MLPolicy{MLPolicySource: trainer.MLPolicySource{MPI: &trainer.MPIMLPolicySource{}}}
	// A Launcher that runs mpirun, as every MPI runtime's does: the
	// runtime's own command is checked once it is read (Run).
	launcher := jobsetv1alpha2.ReplicatedJob{Name: api.LauncherJob}
	launcher.Template.Spec.Template.Spec.Containers = []corev1.Container{{Name: api.NodeContainer, Command: []string{"mpirun"}}}
	rt.Spec.Template.Spec.ReplicatedJobs = []jobsetv1alpha2.ReplicatedJob{launcher}
	return rt
}

// copyRuntime gives a TrainJob from a file that names another job's
// per-job runtime (kubectl get trainjob X -o yaml, renamed) a copy of that
// runtime of its own, read as the user: its own artifacts and checkpoint
// place, the same images, resources and data connections.
func (c *clients) copyRuntime(ctx context.Context, job *jobspec.Job) error {
	tj := job.TrainJob
	ref := tj.Spec.RuntimeRef
	if ptr.Deref(ref.Kind, "") != trainer.TrainingRuntimeKind || ref.Name == tj.Name {
		return nil
	}
	src := &trainer.TrainingRuntime{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: tj.Namespace, Name: ref.Name}, src); err != nil {
		if apierrors.IsNotFound(err) || apierrors.IsForbidden(err) {
			return nil // admission and Trainer answer a missing runtime
		}
		return err
	}
	jobspec.CopyRuntime(job, src)
	return nil
}

// fitWorkers makes a TrainJob from a file do what it says: an image or
// resourcesPerNode that its runtime would give the Launcher alone go into
// a per-job runtime, so the Workers get them too.
func (c *clients) fitWorkers(ctx context.Context, job *jobspec.Job) (*jobspec.Job, error) {
	tj := job.TrainJob
	tr := tj.Spec.Trainer
	if tr == nil || (tr.Image == nil && tr.ResourcesPerNode == nil) || ptr.Deref(tj.Spec.RuntimeRef.Kind, trainer.ClusterTrainingRuntimeKind) != trainer.ClusterTrainingRuntimeKind {
		return job, nil
	}
	base := &trainer.ClusterTrainingRuntime{}
	if err := c.Get(ctx, client.ObjectKey{Name: tj.Spec.RuntimeRef.Name}, base); err != nil {
		if apierrors.IsNotFound(err) || apierrors.IsForbidden(err) {
			// Admission and Trainer answer a missing runtime, with a
			// "did you mean".
			return job, nil
		}
		return nil, err
	}
	if !runtimes.IsMPI(&base.Spec) {
		return job, nil
	}
	in, _ := jobspec.InputOf(tj, nil, base)
	built, err := jobspec.Build(in, base)
	if err != nil {
		return nil, usageErr("-f: %v", err)
	}
	if built.Runtime == nil {
		return job, nil
	}
	out := tj.DeepCopy()
	out.Spec.RuntimeRef = built.TrainJob.Spec.RuntimeRef
	out.Spec.Trainer.Image, out.Spec.Trainer.ResourcesPerNode = nil, nil
	if out.Labels == nil {
		out.Labels = map[string]string{}
	}
	out.Labels[api.BaseRuntimeLabel] = base.Name
	return &jobspec.Job{TrainJob: out, Runtime: built.Runtime}, nil
}

func (c *createOptions) print(job *jobspec.Job, format string) error {
	return printJob(c.Out, job, format)
}

// printJob writes a job's objects: the per-job runtime (if any) first, as
// they are created, so the output can be given to create -f again.
func printJob(out io.Writer, job *jobspec.Job, format string) error {
	var objs []any
	if job.Runtime != nil {
		rt := job.Runtime.DeepCopy()
		rt.ManagedFields = nil
		rt.APIVersion, rt.Kind = trainer.GroupVersion.String(), trainer.TrainingRuntimeKind
		objs = append(objs, rt)
	}
	tj := job.TrainJob.DeepCopy()
	tj.ManagedFields = nil
	tj.APIVersion, tj.Kind = trainer.GroupVersion.String(), trainer.TrainJobKind
	objs = append(objs, tj)
	if format == "json" {
		v := objs[0]
		if len(objs) > 1 {
			v = map[string]any{"apiVersion": "v1", "kind": "List", "items": objs}
		}
		b, err := jsonIndent(v)
		if err != nil {
			return err
		}
		_, err = out.Write(b)
		return err
	}
	for i, o := range objs {
		b, err := yaml.Marshal(o)
		if err != nil {
			return err
		}
		if i > 0 {
			fmt.Fprintln(out, "---")
		}
		if _, err := out.Write(b); err != nil {
			return err
		}
	}
	return nil
}

// readJobFile reads a TrainJob manifest, optionally with the per-job
// TrainingRuntime before it (what create --dry-run=client and convert
// print).
func readJobFile(path string, stdin io.Reader) (*jobspec.Job, error) {
	var b []byte
	var err error
	if path == "-" {
		b, err = io.ReadAll(stdin)
	} else {
		b, err = os.ReadFile(path)
	}
	if err != nil {
		return nil, usageErr("-f %s: %v", path, err)
	}
	job := &jobspec.Job{}
	docs, err := splitYAML(b)
	if err != nil {
		return nil, usageErr("-f %s is not YAML: %v", path, err)
	}
	for i, doc := range docs {
		var meta metav1.TypeMeta
		if err := yaml.Unmarshal(doc, &meta); err != nil {
			return nil, usageErr("-f %s, document %d is not YAML: %v", path, i+1, err)
		}
		switch meta.Kind {
		case trainer.TrainJobKind:
			if job.TrainJob != nil {
				return nil, usageErr("-f %s has more than one TrainJob: give one job per file", path)
			}
			job.TrainJob = &trainer.TrainJob{}
			if err := yaml.UnmarshalStrict(doc, job.TrainJob); err != nil {
				return nil, usageErr("-f %s is not a valid TrainJob: %v", path, err)
			}
		case trainer.TrainingRuntimeKind:
			job.Runtime = &trainer.TrainingRuntime{}
			if err := yaml.UnmarshalStrict(doc, job.Runtime); err != nil {
				return nil, usageErr("-f %s: the TrainingRuntime is not valid: %v", path, err)
			}
		case trainer.ClusterTrainingRuntimeKind:
			return nil, usageErr("-f %s holds a ClusterTrainingRuntime: that is an administrator's (kubectl apply -f); create -f takes a TrainJob and its per-job TrainingRuntime", path)
		default:
			return nil, usageErr("-f %s: kind is %q, want TrainJob (convert a legacy MPIJob with kubectl mpijob convert -f)", path, meta.Kind)
		}
	}
	if job.TrainJob == nil {
		return nil, usageErr("-f %s has no TrainJob", path)
	}
	if job.TrainJob.Name == "" {
		return nil, usageErr("-f %s: metadata.name is empty", path)
	}
	if rt := job.Runtime; rt != nil {
		ref := job.TrainJob.Spec.RuntimeRef
		if ptr.Deref(ref.Kind, "") != trainer.TrainingRuntimeKind || ref.Name != rt.Name {
			return nil, usageErr("-f %s: the TrainJob's spec.runtimeRef does not name the TrainingRuntime %s in the file", path, rt.Name)
		}
	}
	// A job exported from another (get -o yaml) and given a new name: its
	// runtime becomes the new job's, with the new job's artifacts folder,
	// and what the cluster wrote on the old one is left out.
	jobspec.Exported(job.TrainJob)
	if job.Runtime != nil {
		jobspec.ExportedRuntime(job.Runtime)
	}
	jobspec.Retarget(job)
	return job, nil
}

// splitYAML splits a multi-document YAML file, skipping empty documents.
func splitYAML(b []byte) ([][]byte, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(b)))
	var out [][]byte
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		if len(bytes.TrimSpace(doc)) > 0 {
			out = append(out, doc)
		}
	}
}

// anyFlag reports whether any of the named flags was set.
func anyFlag(changed func(string) bool, names ...string) bool {
	for _, n := range names {
		if changed(n) {
			return true
		}
	}
	return false
}
