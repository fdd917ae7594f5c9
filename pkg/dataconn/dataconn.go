// Package dataconn is what mpijob knows of data connections: OpenShift AI's
// S3 connection Secrets (label opendatahub.io/dashboard "true", annotation
// opendatahub.io/connection-type "s3", keys AWS_*), and PersistentVolumeClaims
// a job mounts. It is pure: it checks a Secret a caller read, and says which
// environment variables and volumes carry a connection into a job's pods,
// always as references to the Secret, never as its values.
//
// The rules are data shared with the Python SDK (testdata/connections.json
// holds the vectors both test).
package dataconn

import (
	"fmt"
	"net/url"
	"path"
	"regexp"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// The labels, annotations and keys of an OpenShift AI S3 connection.
const (
	DashboardLabel           = "opendatahub.io/dashboard"
	ConnectionTypeAnnotation = "opendatahub.io/connection-type"
	// ConnectionTypeRefAnnotation is what newer OpenShift AI releases
	// write instead of ConnectionTypeAnnotation.
	ConnectionTypeRefAnnotation = "opendatahub.io/connection-type-ref"
	TypeS3                      = "s3"

	AccessKeyID     = "AWS_ACCESS_KEY_ID"
	SecretAccessKey = "AWS_SECRET_ACCESS_KEY"
	Region          = "AWS_DEFAULT_REGION"
	Endpoint        = "AWS_S3_ENDPOINT"
	Bucket          = "AWS_S3_BUCKET"
)

// Environment variables mpijob sets in a job with data connections.
const (
	// ConnectionsEnv lists the job's data connections, comma-separated.
	ConnectionsEnv = "MPIJOB_DATA_CONNECTIONS"
	// JobNameEnv is the job's name.
	JobNameEnv = "MPIJOB_JOB_NAME"
	// OutputEnv is where the job's artifacts go: s3://BUCKET/JOB/ on the
	// first data connection, else a folder named after the job on the
	// first PVC.
	OutputEnv = "MPIJOB_OUTPUT_URI"
	// CheckpointEnv is the job's checkpoint place: checkpoints/ under its
	// artifacts (OutputEnv). It names the job, so it stays the same across
	// the job's retries, suspends and preemptions, and a copy of the job
	// under another name gets its own.
	CheckpointEnv = "MPIJOB_CHECKPOINT_URI"
	// ResumeEnv is where a job that starts with no checkpoint of its own
	// takes its first one: another job's checkpoint place, or a URI the
	// user gave (--resume-from).
	ResumeEnv = "MPIJOB_RESUME_FROM"
	// CheckpointDir is the folder of the checkpoints under a job's
	// artifacts.
	CheckpointDir = "checkpoints/"
	// ForwardEnv is OpenMPI's list of variables mpirun passes to every
	// rank (the ranks on Workers are started over SSH and do not see the
	// Worker container's environment); MPICH's and Intel MPI's Hydra pass
	// the whole environment by default.
	ForwardEnv = "OMPI_MCA_mca_base_env_list"
)

// Keys are the keys of an S3 connection, in the order jobs get them.
var Keys = []string{AccessKeyID, SecretAccessKey, Region, Endpoint, Bucket}

// Required are the keys a job needs; a missing region means us-east-1.
var Required = []string{AccessKeyID, SecretAccessKey, Endpoint, Bucket}

// PVC is a PersistentVolumeClaim a job mounts on the Launcher and every
// Worker, read-write.
type PVC struct {
	// Claim is the PersistentVolumeClaim's name.
	Claim string `json:"claim"`
	// MountPath is where it appears ("": DefaultMountPath(Claim)).
	MountPath string `json:"mount_path,omitempty"`
}

// DefaultMountPath is where a PVC appears when the job does not say.
func DefaultMountPath(claim string) string { return "/mnt/" + claim }

// VolumeName is the pod volume of a PVC.
func VolumeName(claim string) string {
	n := "pvc-" + claim
	if len(n) > 63 {
		n = strings.TrimRight(n[:63], "-.")
	}
	return n
}

// Problem is what is wrong with a data connection: its name, the key
// (empty when the whole Secret is at fault) and the fix.
type Problem struct {
	Connection string `json:"connection"`
	Key        string `json:"key,omitempty"`
	Problem    string `json:"problem"`
}

func (p *Problem) Error() string {
	if p.Key == "" {
		return fmt.Sprintf("data connection %q: %s", p.Connection, p.Problem)
	}
	return fmt.Sprintf("data connection %q, key %s: %s", p.Connection, p.Key, p.Problem)
}

// IsConnection reports whether a Secret is an OpenShift AI connection.
func IsConnection(labels, annotations map[string]string) bool {
	return labels[DashboardLabel] == "true" && (annotations[ConnectionTypeAnnotation] != "" || annotations[ConnectionTypeRefAnnotation] != "")
}

// TypeOf is a connection's type ("s3", "uri", ...).
func TypeOf(annotations map[string]string) string {
	if t := annotations[ConnectionTypeAnnotation]; t != "" {
		return t
	}
	return annotations[ConnectionTypeRefAnnotation]
}

var dnsName = regexp.MustCompile(`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`)

// Missing is the problem of a connection with no Secret in the namespace.
func Missing(name string) *Problem {
	return &Problem{Connection: name, Problem: "no such data connection in this namespace: list them with kubectl get secrets -l " + DashboardLabel + "=true"}
}

// Check says what keeps the Secret named name, with these labels,
// annotations and data, from serving a job as an S3 data connection.
func Check(name string, labels, annotations map[string]string, data map[string][]byte) *Problem {
	if !IsConnection(labels, annotations) {
		return &Problem{Connection: name, Problem: fmt.Sprintf("this Secret is not a data connection (label %s=true and annotation %s=%s): create the connection in the dashboard, or add the label and the annotation", DashboardLabel, ConnectionTypeAnnotation, TypeS3)}
	}
	if t := TypeOf(annotations); t != TypeS3 {
		return &Problem{Connection: name, Problem: fmt.Sprintf("is a %q connection; jobs take S3 connections (type %s)", t, TypeS3)}
	}
	for _, k := range Required {
		if len(strings.TrimSpace(string(data[k]))) == 0 {
			return &Problem{Connection: name, Key: k, Problem: "is missing or empty: add it to the connection (edit it in the dashboard, or kubectl edit secret " + name + ")"}
		}
	}
	ep := strings.TrimSpace(string(data[Endpoint]))
	if u, err := url.Parse(ep); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return &Problem{Connection: name, Key: Endpoint, Problem: fmt.Sprintf("%q is not an endpoint URL: use e.g. https://s3.us-east-1.amazonaws.com or http://minio.storage.svc:9000", ep)}
	}
	if b := strings.TrimSpace(string(data[Bucket])); len(b) < 3 || len(b) > 63 || !dnsName.MatchString(b) {
		return &Problem{Connection: name, Key: Bucket, Problem: fmt.Sprintf("%q is not a bucket name: use 3 to 63 lower-case letters, digits, '-' and '.'", b)}
	}
	return nil
}

// EnvPrefix is the prefix of the variables of every connection after the
// first: AWS_S3_BUCKET of connection "archive-2" is ARCHIVE_2_AWS_S3_BUCKET.
// The first connection's are the plain AWS_* names that S3 clients read.
func EnvPrefix(name string, first bool) string {
	if first {
		return ""
	}
	return strings.ToUpper(strings.NewReplacer("-", "_", ".", "_").Replace(name)) + "_"
}

// Env is the environment of a job's Launcher and Workers for its data
// connections and PVCs: each connection's keys as references to its
// Secret, the job's name, where its artifacts go, and OpenMPI's list of
// variables to pass to the ranks.
func Env(job string, connections []string, pvcs []PVC) []corev1.EnvVar {
	if len(connections) == 0 && len(pvcs) == 0 {
		return nil
	}
	var env []corev1.EnvVar
	var forward []string
	for i, c := range connections {
		prefix := EnvPrefix(c, i == 0)
		for _, k := range Keys {
			ref := &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: c}, Key: k}
			if !slices.Contains(Required, k) {
				ref.Optional = ptr.To(true)
			}
			env = append(env, corev1.EnvVar{Name: prefix + k, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: ref}})
			forward = append(forward, prefix+k)
		}
	}
	if len(connections) > 0 {
		env = append(env, corev1.EnvVar{Name: ConnectionsEnv, Value: strings.Join(connections, ",")})
		forward = append(forward, ConnectionsEnv)
	}
	env = append(env, corev1.EnvVar{Name: JobNameEnv, Value: job})
	forward = append(forward, JobNameEnv)
	// Kubernetes expands $(AWS_S3_BUCKET) from the variable above, so the
	// bucket's name stays in the Secret.
	output := ""
	switch {
	case len(connections) > 0:
		output = fmt.Sprintf("s3://$(%s)/%s/", Bucket, job)
	case len(pvcs) > 0:
		output = fmt.Sprintf("file://%s/%s/", MountPathOf(pvcs[0]), job)
	}
	env = append(env, corev1.EnvVar{Name: OutputEnv, Value: output})
	forward = append(forward, OutputEnv)
	env = append(env, corev1.EnvVar{Name: CheckpointEnv, Value: output + CheckpointDir})
	forward = append(forward, CheckpointEnv)
	env = append(env, corev1.EnvVar{Name: ForwardEnv, Value: strings.Join(forward, ";")})
	return env
}

// CheckpointsOf is the checkpoint place of job on a job's first storage:
// s3://BUCKET/JOB/checkpoints/ on its first data connection (the bucket
// expanded from the connection's AWS_S3_BUCKET in the pods), else the
// job's folder on its first PVC; "" without either.
func CheckpointsOf(job string, connections []string, pvcs []PVC) string {
	switch {
	case len(connections) > 0:
		return fmt.Sprintf("s3://$(%s)/%s/%s", Bucket, job, CheckpointDir)
	case len(pvcs) > 0:
		return fmt.Sprintf("file://%s/%s/%s", MountPathOf(pvcs[0]), job, CheckpointDir)
	}
	return ""
}

// WithResume adds ResumeEnv = uri to env (Env's variables), passed to
// every rank as the others are.
func WithResume(env []corev1.EnvVar, uri string) []corev1.EnvVar {
	if uri == "" {
		return env
	}
	out := make([]corev1.EnvVar, 0, len(env)+1)
	for _, e := range env {
		if e.Name == ForwardEnv && e.ValueFrom == nil {
			out = append(out, corev1.EnvVar{Name: ResumeEnv, Value: uri})
			e.Value += ";" + ResumeEnv
		}
		out = append(out, e)
	}
	return out
}

// ResumeOf reads back the ResumeEnv of a node container's environment.
func ResumeOf(env []corev1.EnvVar) string {
	for _, e := range env {
		if e.Name == ResumeEnv && e.ValueFrom == nil {
			return e.Value
		}
	}
	return ""
}

// MountPathOf is where p appears in the pods.
func MountPathOf(p PVC) string {
	if p.MountPath != "" {
		return p.MountPath
	}
	return DefaultMountPath(p.Claim)
}

// IsJobEnv reports whether a variable is one Env makes for some set of
// connections: the per-job runtime's admission check sets them aside.
func IsJobEnv(e corev1.EnvVar) bool {
	switch e.Name {
	case ConnectionsEnv, JobNameEnv, OutputEnv, CheckpointEnv, ResumeEnv, ForwardEnv:
		return e.ValueFrom == nil
	}
	if e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil {
		return false
	}
	k := e.ValueFrom.SecretKeyRef.Key
	return slices.Contains(Keys, k) && (e.Name == k || strings.HasSuffix(e.Name, "_"+k))
}

// ConnectionsOf reads back the data connections of a node container's
// environment (Env's ConnectionsEnv).
func ConnectionsOf(env []corev1.EnvVar) []string {
	for _, e := range env {
		if e.Name == ConnectionsEnv && e.ValueFrom == nil && e.Value != "" {
			return strings.Split(e.Value, ",")
		}
	}
	return nil
}

// Volumes are the pod volumes and the node container's mounts of pvcs
// and config maps (read-only).
func Volumes(pvcs []PVC, cms ...ConfigMap) ([]corev1.Volume, []corev1.VolumeMount) {
	var vols []corev1.Volume
	var mounts []corev1.VolumeMount
	for _, p := range pvcs {
		n := VolumeName(p.Claim)
		vols = append(vols, corev1.Volume{Name: n, VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: p.Claim},
		}})
		mounts = append(mounts, corev1.VolumeMount{Name: n, MountPath: MountPathOf(p)})
	}
	for _, c := range cms {
		n := ConfigMapVolumeName(c.Name)
		vols = append(vols, corev1.Volume{Name: n, VolumeSource: corev1.VolumeSource{
			ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: c.Name}},
		}})
		mounts = append(mounts, corev1.VolumeMount{Name: n, MountPath: ConfigMapPathOf(c), ReadOnly: true})
	}
	return vols, mounts
}

// ConfigMap is a ConfigMap of the job's namespace mounted read-only on the
// Launcher and every Worker: each key is a file (a training config, a
// hostfile of the program's own, a script).
type ConfigMap struct {
	// Name is the ConfigMap's name.
	Name string `json:"name"`
	// MountPath is the folder its keys appear in ("":
	// DefaultConfigMapPath(Name)).
	MountPath string `json:"mount_path,omitempty"`
}

// DefaultConfigMapPath is where a ConfigMap appears when the job does not
// say.
func DefaultConfigMapPath(name string) string { return "/config/" + name }

// ConfigMapPathOf is where c appears in the pods.
func ConfigMapPathOf(c ConfigMap) string {
	if c.MountPath != "" {
		return c.MountPath
	}
	return DefaultConfigMapPath(c.Name)
}

// ConfigMapVolumeName is the pod volume of a ConfigMap.
func ConfigMapVolumeName(name string) string {
	n := "cm-" + name
	if len(n) > 63 {
		n = strings.TrimRight(n[:63], "-.")
	}
	return n
}

// ValidateConfigMap says what is wrong with a ConfigMap a job asks for,
// before any read of the cluster; "" when nothing. Its mount path follows
// a PVC's rules.
func ValidateConfigMap(c ConfigMap) string {
	if c.Name == "" || len(c.Name) > 253 || !dnsName.MatchString(c.Name) {
		return "is not a ConfigMap name: use lower-case letters, digits, '-' and '.'"
	}
	return validateMountPath(ConfigMapPathOf(c))
}

// ValidatePVC says what is wrong with a PVC a job asks for, before any
// read of the cluster; "" when nothing.
func ValidatePVC(p PVC) string {
	if p.Claim == "" || len(p.Claim) > 253 || !dnsName.MatchString(p.Claim) {
		return "is not a PersistentVolumeClaim name: use lower-case letters, digits, '-' and '.'"
	}
	return validateMountPath(MountPathOf(p))
}

// validateMountPath refuses a mount path that is not absolute or would
// hide what the MPI runtime needs.
func validateMountPath(mp string) string {
	if !strings.HasPrefix(mp, "/") || strings.Contains(mp, ":") || strings.Contains(mp, "..") {
		return fmt.Sprintf("mount path %q must be an absolute path without ':' or '..', e.g. /mnt/data", mp)
	}
	if clean := path.Clean(mp); clean != mp {
		// //etc and /./etc are /etc: judged as written, they slipped past.
		return fmt.Sprintf("mount path %q is %s written another way: write it plainly, without '//', '/./' or a trailing '/', e.g. /mnt/data", mp, clean)
	}
	if mp == "/" {
		return fmt.Sprintf("mount path %q would hide the whole file system of the pods: use a path under /mnt", mp)
	}
	for _, reserved := range []string{"/home/mpiuser", "/proc", "/dev", "/sys", "/usr", "/bin", "/sbin", "/lib", "/lib64", "/etc", "/opt/mpijob"} {
		if mp == reserved || strings.HasPrefix(mp, reserved+"/") {
			return fmt.Sprintf("mount path %q would hide %s, which the MPI runtime needs: use a path under /mnt", mp, reserved)
		}
	}
	return ""
}
