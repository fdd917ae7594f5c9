//go:build e2e

package framework

import (
	"context"
	"testing"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The local cluster's users are real RBAC subjects: each can do what its
// role grants in its own namespace and nothing more.
func TestRBACIsReal(t *testing.T) {
	c := Get(t)
	cases := map[string]struct {
		user      string
		do        func(context.Context, client.Client) error
		wantAllow bool
	}{
		"dev-a may create TrainJobs in team-a": {
			user: "dev-a", wantAllow: true,
			do: func(ctx context.Context, cl client.Client) error {
				return cl.Create(ctx, MakeTrainJob("rbac-probe", "team-a", "mpi-openmpi").NumNodes(1).Obj(), client.DryRunAll)
			},
		},
		"viewer-a may list TrainJobs in team-a": {
			user: "viewer-a", wantAllow: true,
			do: func(ctx context.Context, cl client.Client) error {
				return cl.List(ctx, &trainer.TrainJobList{}, client.InNamespace("team-a"))
			},
		},
		"viewer-a may not create TrainJobs in team-a": {
			user: "viewer-a",
			do: func(ctx context.Context, cl client.Client) error {
				return cl.Create(ctx, MakeTrainJob("rbac-probe", "team-a", "mpi-openmpi").NumNodes(1).Obj(), client.DryRunAll)
			},
		},
		"dev-b may not list team-a's TrainJobs": {
			user: "dev-b",
			do: func(ctx context.Context, cl client.Client) error {
				return cl.List(ctx, &trainer.TrainJobList{}, client.InNamespace("team-a"))
			},
		},
		"dev-b may not read a team-a TrainJob": {
			user: "dev-b",
			do: func(ctx context.Context, cl client.Client) error {
				return cl.Get(ctx, client.ObjectKey{Namespace: "team-a", Name: "any"}, &trainer.TrainJob{})
			},
		},
		"viewer-a may list team-a's LocalQueues (queued jobs' next steps send members there)": {
			user: "viewer-a", wantAllow: true,
			do: func(ctx context.Context, cl client.Client) error {
				l := &unstructured.UnstructuredList{}
				l.SetGroupVersionKind(schema.GroupVersionKind{Group: "kueue.x-k8s.io", Version: "v1beta2", Kind: "LocalQueueList"})
				return cl.List(ctx, l, client.InNamespace("team-a"))
			},
		},
		"dev-b may not list team-a's LocalQueues": {
			user: "dev-b",
			do: func(ctx context.Context, cl client.Client) error {
				l := &unstructured.UnstructuredList{}
				l.SetGroupVersionKind(schema.GroupVersionKind{Group: "kueue.x-k8s.io", Version: "v1beta2", Kind: "LocalQueueList"})
				return cl.List(ctx, l, client.InNamespace("team-a"))
			},
		},
		"dev-b may list MPI runtimes": {
			user: "dev-b", wantAllow: true,
			do: func(ctx context.Context, cl client.Client) error {
				return cl.List(ctx, &trainer.ClusterTrainingRuntimeList{})
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			err := tc.do(context.Background(), c.As(t, tc.user))
			forbidden := apierrors.IsForbidden(err)
			if tc.wantAllow && err != nil {
				t.Fatalf("%s was refused: %v", tc.user, err)
			}
			if !tc.wantAllow && !forbidden {
				t.Fatalf("%s got %v, want Forbidden", tc.user, err)
			}
		})
	}
}
