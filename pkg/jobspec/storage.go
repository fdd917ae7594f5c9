package jobspec

import (
	"context"
	"fmt"
	"slices"
	"strings"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mpijob/mpijob/pkg/dataconn"
	"github.com/mpijob/mpijob/pkg/suggest"
)

// CheckStorage reads, as the user, the data connections, PVCs and ConfigMaps a job
// names in namespace ns, and returns an *Error naming the first that is
// missing, is not an S3 connection or lacks a key the job needs, before
// anything is created.
func CheckStorage(ctx context.Context, c client.Reader, ns string, in Input) error {
	for _, name := range in.DataConnections {
		s := &corev1.Secret{}
		err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, s)
		switch {
		case apierrors.IsNotFound(err):
			p := dataconn.Missing(name)
			return errorf("data_connections", name, "%s%s", p.Problem, didYouMean(ctx, c, ns, name))
		case apierrors.IsForbidden(err):
			return errorf("data_connections", name, "you may not read Secrets in namespace %s, so the connection cannot be checked or used: ask for a role that reads them (e.g. edit)", ns)
		case err != nil:
			return fmt.Errorf("failed to read data connection %s/%s: %w", ns, name, err)
		}
		if p := dataconn.Check(name, s.Labels, s.Annotations, s.Data); p != nil {
			v := name
			if p.Key != "" {
				return errorf("data_connections", v, "key %s %s", p.Key, p.Problem)
			}
			return errorf("data_connections", v, "%s", p.Problem)
		}
	}
	for _, p := range in.PVCs {
		pvc := &corev1.PersistentVolumeClaim{}
		err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: p.Claim}, pvc)
		switch {
		case apierrors.IsNotFound(err):
			return errorf("pvcs", p.Claim, "no such PersistentVolumeClaim in namespace %s: create it first (kubectl get pvc lists them)", ns)
		case apierrors.IsForbidden(err):
			// Reading claims is not needed to use one: the pods will say.
		case err != nil:
			return fmt.Errorf("failed to read PersistentVolumeClaim %s/%s: %w", ns, p.Claim, err)
		case len(in.PVCs) > 0 && in.Workers > 0 && !slices.Contains(pvc.Spec.AccessModes, corev1.ReadWriteMany) && !slices.Contains(pvc.Spec.AccessModes, corev1.ReadOnlyMany):
			// The Launcher and every Worker mount it, on different nodes.
			return errorf("pvcs", p.Claim, "has access modes %v; the Launcher and every Worker mount it, on different nodes: use a ReadWriteMany claim", pvc.Spec.AccessModes)
		}
	}
	if err := checkResume(ctx, c, ns, in); err != nil {
		return err
	}
	for _, cm := range in.ConfigMaps {
		err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: cm.Name}, &corev1.ConfigMap{})
		switch {
		case apierrors.IsNotFound(err):
			return errorf("config_maps", cm.Name, "no such ConfigMap in namespace %s: create it first (kubectl create configmap %s --from-file=...)", ns, cm.Name)
		case apierrors.IsForbidden(err):
			// Reading ConfigMaps is not needed to use one: the pods will say.
		case err != nil:
			return fmt.Errorf("failed to read ConfigMap %s/%s: %w", ns, cm.Name, err)
		}
	}
	return nil
}

// checkResume checks, as the user, that the job a ResumeFrom names
// exists in namespace ns: a typo would otherwise start the job from its
// first step, or fail it once it runs.
func checkResume(ctx context.Context, c client.Reader, ns string, in Input) error {
	r := in.ResumeFrom
	if r == "" || strings.Contains(r, "://") {
		return nil
	}
	err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: r}, &trainer.TrainJob{})
	switch {
	case apierrors.IsNotFound(err):
		hint := ""
		list := &trainer.TrainJobList{}
		if c.List(ctx, list, client.InNamespace(ns)) == nil {
			var names []string
			for _, j := range list.Items {
				names = append(names, j.Name)
			}
			if m := suggest.Closest(r, names); m != "" {
				hint = fmt.Sprintf(" (did you mean %s?)", m)
			}
		}
		return errorf("resume_from", r, "no MPI job %s in namespace %s%s: name a job of this namespace (kubectl mpijob get), or, for a job that is gone, its checkpoint folder as a URI, e.g. s3://BUCKET/%s/checkpoints/", r, ns, hint, r)
	case apierrors.IsForbidden(err):
		return errorf("resume_from", r, "you may not read TrainJobs in namespace %s: give the checkpoint folder as a URI instead, e.g. s3://BUCKET/%s/checkpoints/", ns, r)
	case err != nil:
		return fmt.Errorf("failed to read MPI job %s/%s: %w", ns, r, err)
	}
	return nil
}

// Connections lists the S3 data connections of namespace ns, by name.
func Connections(ctx context.Context, c client.Reader, ns string) ([]string, error) {
	list := &corev1.SecretList{}
	if err := c.List(ctx, list, client.InNamespace(ns), client.MatchingLabels{dataconn.DashboardLabel: "true"}); err != nil {
		return nil, err
	}
	var out []string
	for _, s := range list.Items {
		if dataconn.IsConnection(s.Labels, s.Annotations) && dataconn.TypeOf(s.Annotations) == dataconn.TypeS3 {
			out = append(out, s.Name)
		}
	}
	slices.Sort(out)
	return out, nil
}

func didYouMean(ctx context.Context, c client.Reader, ns, name string) string {
	names, err := Connections(ctx, c, ns)
	if err != nil {
		return ""
	}
	if m := suggest.Closest(name, names); m != "" {
		return fmt.Sprintf(" (did you mean %s?)", m)
	}
	if len(names) > 0 {
		return fmt.Sprintf(" (this namespace has: %v)", names)
	}
	return ""
}
