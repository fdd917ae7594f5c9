package jobspec

import (
	"fmt"
	"maps"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/mpijob/mpijob/pkg/api"
	"github.com/mpijob/mpijob/pkg/runtimes"
)

// What a job sets besides its shape and its data: how long it may run,
// how often it starts again, its priority, the nodes it may use, the
// Secrets its images are pulled with, a description and mpirun's flags.
// The SDK (sdk/python/mpijob/jobspec.py) mirrors these rules; the shared
// vectors test both.

// MaxDescription is the longest description a job takes.
const MaxDescription = 500

// MaxRetries is the most restarts a job may ask for: each starts every
// Worker and the Launcher anew.
const MaxRetries = 10

// timeoutPattern is a timeout: hours, minutes and seconds, each a whole
// number with its unit, in that order (90m, 2h, 1h30m, 45s).
var timeoutPattern = regexp.MustCompile(`^(?:([0-9]{1,6})h)?(?:([0-9]{1,6})m)?(?:([0-9]{1,9})s)?$`)

// launcherPrograms are the first words of a command that take mpirun's
// flags: the MPI launchers of the shipped images and their usual names.
var launcherPrograms = []string{"mpirun", "mpiexec", "mpijob-mpiexec", "mpiexec.hydra", "mpirun.openmpi", "mpiexec.openmpi", "orterun", "prterun", "horovodrun"}

// ParseTimeout reads a timeout such as 90m, 2h or 1h30m into seconds.
func ParseTimeout(s string) (int64, error) {
	m := timeoutPattern.FindStringSubmatch(s)
	if s == "" || m == nil {
		return 0, fmt.Errorf("is not a duration: use e.g. 90m, 2h or 1h30m (whole hours h, minutes m and seconds s; a bare number has no unit)")
	}
	var secs int64
	for i, unit := range []int64{3600, 60, 1} {
		if m[i+1] != "" {
			n, _ := strconv.ParseInt(m[i+1], 10, 64)
			secs += n * unit
		}
	}
	if secs < 1 {
		return 0, fmt.Errorf("must be more than 0: use e.g. 90m, 2h or 1h30m, or leave it out for no limit")
	}
	return secs, nil
}

// MaxGracePeriod is the longest grace period a job may give its ranks to
// stop: a pod that takes longer holds its node (and the quota Kueue would
// give the job that preempted it) for that long.
const MaxGracePeriod = 3600

// parseGracePeriod reads Input.GracePeriod ("": nil, the runtime's).
func parseGracePeriod(s string) (*int64, error) {
	if s == "" {
		return nil, nil
	}
	secs, err := ParseTimeout(s)
	switch {
	case err != nil && timeoutPattern.MatchString(s):
		return nil, errorf("grace_period", s, "must be 1s or more: the ranks get SIGTERM and this long to save and exit")
	case err != nil:
		return nil, errorf("grace_period", s, "is not a duration: use e.g. 90s, 5m or 1h (whole hours h, minutes m and seconds s), or leave it out for the runtime's")
	}
	if secs > MaxGracePeriod {
		return nil, errorf("grace_period", s, "is more than %s: a pod that takes longer to stop holds its node that long; save checkpoints more often instead", FormatTimeout(MaxGracePeriod))
	}
	return &secs, nil
}

// FormatTimeout writes seconds the way ParseTimeout reads them, largest
// units first (5400 → 1h30m).
func FormatTimeout(secs int64) string {
	if secs <= 0 {
		return ""
	}
	var b strings.Builder
	for _, u := range []struct {
		n    int64
		name string
	}{{3600, "h"}, {60, "m"}, {1, "s"}} {
		if secs >= u.n {
			fmt.Fprintf(&b, "%d%s", secs/u.n, u.name)
			secs %= u.n
		}
	}
	return b.String()
}

// validateScheduling checks the timeout, retries, priority, tolerations,
// image pull Secrets and description, and returns the timeout in seconds
// (0: none).
func validateScheduling(in Input) (int64, error) {
	var deadline int64
	if in.Timeout != "" {
		secs, err := ParseTimeout(in.Timeout)
		if err != nil {
			return 0, errorf("timeout", in.Timeout, "%s", err.Error())
		}
		deadline = secs
	}
	if in.Retries < 0 || in.Retries > MaxRetries {
		return 0, errorf("retries", fmt.Sprint(in.Retries), "use 0 to %d: how many times the whole job starts again after a failure", MaxRetries)
	}
	if in.Priority != "" {
		if errs := validation.IsDNS1123Subdomain(in.Priority); len(errs) > 0 {
			return 0, errorf("priority", in.Priority, "is not a WorkloadPriorityClass name: use lower-case letters, digits, '-' and '.' (kubectl get workloadpriorityclasses)")
		}
		if in.Queue == "" {
			return 0, errorf("priority", in.Priority, "Kueue orders the jobs of a queue by priority, and this job has no queue: give it a queue as well")
		}
	}
	for _, t := range in.Tolerations {
		if problem := tolerationProblem(t); problem != "" {
			return 0, errorf("tolerations", runtimes.FormatToleration(t), "%s", problem)
		}
	}
	seen := map[string]bool{}
	for _, s := range in.ImagePullSecrets {
		if errs := validation.IsDNS1123Subdomain(s); len(errs) > 0 {
			return 0, errorf("image_pull_secrets", s, "is not a Secret name: use lower-case letters, digits, '-' and '.' (kubectl get secrets --field-selector type=kubernetes.io/dockerconfigjson)")
		}
		if seen[s] {
			return 0, errorf("image_pull_secrets", s, "is named twice: name each Secret once")
		}
		seen[s] = true
	}
	if in.EndStuckAfter != "" {
		if _, ferr := runtimes.ParseEndStuckAfter(map[string]string{runtimes.EndStuckAfterAnnotation: in.EndStuckAfter}); ferr != nil {
			return 0, errorf("end_stuck_after", in.EndStuckAfter, "is not a grace period: use a duration such as 10m, 30m or 2h, or off (never end the job)")
		}
	}
	if n := utf8.RuneCountInString(in.Description); n > MaxDescription {
		return 0, errorf("description", string([]rune(in.Description)[:40])+"…", "is %d characters: use at most %d", n, MaxDescription)
	}
	return deadline, nil
}

// tolerationProblem says what is wrong with t ("" when nothing is).
func tolerationProblem(t corev1.Toleration) string {
	if t.Key != "" {
		if errs := validation.IsQualifiedName(t.Key); len(errs) > 0 {
			return "the key is not a taint key: write KEY[=VALUE][:EFFECT], as in dedicated=gpu:NoSchedule"
		}
	}
	switch t.Operator {
	case corev1.TolerationOpExists:
		if t.Value != "" {
			return "a toleration of any value (Exists) takes no value: write KEY:EFFECT, or KEY=VALUE:EFFECT for one value"
		}
	case corev1.TolerationOpEqual, "":
		if t.Key == "" {
			return "has no taint key: write KEY[=VALUE][:EFFECT], as in dedicated=gpu:NoSchedule"
		}
		if errs := validation.IsValidLabelValue(t.Value); len(errs) > 0 {
			return "the value is not a taint value: use at most 63 letters, digits, '-', '_' or '.'"
		}
	default:
		return fmt.Sprintf("the operator %q is neither Equal nor Exists", t.Operator)
	}
	switch t.Effect {
	case "", corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
	default:
		return fmt.Sprintf("the effect %q is none of NoSchedule, PreferNoSchedule or NoExecute", t.Effect)
	}
	if t.TolerationSeconds != nil {
		return "tolerationSeconds is not offered: a Worker evicted mid-run fails the job"
	}
	return ""
}

// ParseToleration reads KEY[=VALUE][:EFFECT] (kubectl taint's form): no
// value tolerates any value of the key, no effect every effect.
func ParseToleration(s string) (corev1.Toleration, error) {
	ts, err := runtimes.ParseTolerations(s)
	if err != nil {
		return corev1.Toleration{}, err
	}
	if len(ts) != 1 {
		return corev1.Toleration{}, fmt.Errorf("%q names %d tolerations: give one per flag", s, len(ts))
	}
	return ts[0], nil
}

// withLauncherFlags is the Launcher's command with in.LauncherFlags after
// its first word: the job's command, or the runtime's when it gives none.
// Without flags it is the job's command as given.
func withLauncherFlags(in Input, base *trainer.ClusterTrainingRuntime) ([]string, error) {
	if len(in.LauncherFlags) == 0 {
		return slices.Clone(in.Command), nil
	}
	flags := strings.Join(in.LauncherFlags, " ")
	if slices.Contains(in.LauncherFlags, "") {
		return nil, errorf("launcher_flags", flags, "has an empty flag")
	}
	if !strings.HasPrefix(in.LauncherFlags[0], "-") {
		return nil, errorf("launcher_flags", flags, "must start with a flag such as --bind-to (the program and its arguments go in command)")
	}
	cmd := in.Command
	if len(cmd) == 0 {
		cmd = LauncherCommand(&base.Spec)
	}
	if len(cmd) == 0 || !slices.Contains(launcherPrograms, path.Base(cmd[0])) {
		first := ""
		if len(cmd) > 0 {
			first = cmd[0]
		}
		return nil, errorf("launcher_flags", flags, "go to mpirun or mpiexec, but the command starts with %q: start it with mpirun, or write the flags into the command", first)
	}
	out := append([]string{cmd[0]}, in.LauncherFlags...)
	return append(out, cmd[1:]...), nil
}

// LauncherCommand is the command of a runtime's Launcher ("node"
// container), nil when it has none.
func LauncherCommand(spec *trainer.TrainingRuntimeSpec) []string {
	launcher, _ := nodeContainers(spec)
	if launcher == nil {
		return nil
	}
	return slices.Clone(launcher.Command)
}

// PodPatch is what the builder's runtime patch sets on the pods of the
// Launcher and the Workers.
type PodPatch struct {
	NodeSelector     map[string]string
	Tolerations      []corev1.Toleration
	ImagePullSecrets []string
}

// Empty reports whether p sets nothing.
func (p PodPatch) Empty() bool {
	return len(p.NodeSelector) == 0 && len(p.Tolerations) == 0 && len(p.ImagePullSecrets) == 0
}

// RuntimePatch is p as the runtime patch of the builder (manager
// PatchManager), the same for the Launcher and the Workers.
func (p PodPatch) RuntimePatch() trainer.RuntimePatch {
	var rjobs []trainer.ReplicatedJobPatch
	for _, name := range []string{api.LauncherJob, api.WorkerJob} {
		spec := &trainer.PodSpecPatch{NodeSelector: maps.Clone(p.NodeSelector)}
		for _, t := range p.Tolerations {
			spec.Tolerations = append(spec.Tolerations, *t.DeepCopy())
		}
		for _, s := range p.ImagePullSecrets {
			spec.ImagePullSecrets = append(spec.ImagePullSecrets, corev1.LocalObjectReference{Name: s})
		}
		rjobs = append(rjobs, trainer.ReplicatedJobPatch{
			Name:     name,
			Template: &trainer.JobTemplatePatch{Spec: &trainer.JobSpecPatch{Template: &trainer.PodTemplatePatch{Spec: spec}}},
		})
	}
	return trainer.RuntimePatch{
		Manager:             PatchManager,
		TrainingRuntimeSpec: &trainer.TrainingRuntimeSpecPatch{Template: &trainer.JobSetTemplatePatch{Spec: &trainer.JobSetSpecPatch{ReplicatedJobs: rjobs}}},
	}
}

// PlacementOf is what the job's runtime patches set on its pods, whoever
// wrote them (the builder, Kueue, a YAML): node labels, tolerations and
// image pull Secrets, each once.
func PlacementOf(tj *trainer.TrainJob) PodPatch {
	var out PodPatch
	for _, p := range tj.Spec.RuntimePatches {
		pp := podPatchOf(p)
		for k, v := range pp.NodeSelector {
			if out.NodeSelector == nil {
				out.NodeSelector = map[string]string{}
			}
			out.NodeSelector[k] = v
		}
		for _, t := range pp.Tolerations {
			if !slices.ContainsFunc(out.Tolerations, func(o corev1.Toleration) bool {
				return o.MatchToleration(&t) && o.TolerationSeconds == t.TolerationSeconds
			}) {
				out.Tolerations = append(out.Tolerations, t)
			}
		}
		for _, s := range pp.ImagePullSecrets {
			if !slices.Contains(out.ImagePullSecrets, s) {
				out.ImagePullSecrets = append(out.ImagePullSecrets, s)
			}
		}
	}
	return out
}

// podPatchOf reads back what a builder's runtime patch sets (its first
// replicated job's pod that sets anything).
func podPatchOf(p trainer.RuntimePatch) PodPatch {
	var out PodPatch
	if p.TrainingRuntimeSpec == nil || p.TrainingRuntimeSpec.Template == nil || p.TrainingRuntimeSpec.Template.Spec == nil {
		return out
	}
	for _, rj := range p.TrainingRuntimeSpec.Template.Spec.ReplicatedJobs {
		if rj.Template == nil || rj.Template.Spec == nil || rj.Template.Spec.Template == nil || rj.Template.Spec.Template.Spec == nil {
			continue
		}
		spec := rj.Template.Spec.Template.Spec
		if len(spec.NodeSelector) == 0 && len(spec.Tolerations) == 0 && len(spec.ImagePullSecrets) == 0 {
			continue
		}
		out.NodeSelector = maps.Clone(spec.NodeSelector)
		for _, t := range spec.Tolerations {
			out.Tolerations = append(out.Tolerations, *t.DeepCopy())
		}
		for _, s := range spec.ImagePullSecrets {
			out.ImagePullSecrets = append(out.ImagePullSecrets, s.Name)
		}
		return out
	}
	return out
}
