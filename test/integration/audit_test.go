//go:build e2e

package integration

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mpijob/mpijob/pkg/localcluster"
	"github.com/mpijob/mpijob/test/framework"
)

// The API server's audit log (config/audit/policy.yaml) says who created
// and who deleted a job, and when: dev-a's create and delete of a job are
// found in it with the user and the time, as docs/admin.md shows.
func TestAuditLogNamesWhoCreatedAndDeleted(t *testing.T) {
	c := framework.Get(t)
	if os.Getenv("MPIJOB_KUBECONFIG") != "" {
		t.Skip("reads the local cluster's audit log; MPIJOB_KUBECONFIG points elsewhere")
	}
	wd, _ := os.Getwd()
	opts, err := localcluster.DefaultOptions(wd)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	devA := c.As(t, "dev-a")
	job := framework.MakeTrainJob(framework.UniqueName("audited"), "team-a", "mpi-openmpi").NumNodes(1).Suspend().Obj()
	before := time.Now().Add(-time.Second)
	if err := devA.Create(ctx, job); err != nil {
		t.Fatal(err)
	}
	if err := devA.Delete(ctx, job, client.PropagationPolicy("Background")); err != nil {
		t.Fatal(err)
	}
	found := map[string]auditv1.Event{}
	// The API server writes its audit log in batches.
	err = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		f, err := os.Open(opts.AuditLogPath())
		if err != nil {
			return false, err
		}
		defer func() { _ = f.Close() }()
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var e auditv1.Event
			if json.Unmarshal(sc.Bytes(), &e) != nil || e.ObjectRef == nil {
				continue
			}
			if e.ObjectRef.Resource == "trainjobs" && e.ObjectRef.Name == job.Name && e.ObjectRef.Namespace == "team-a" && e.Stage == auditv1.StageResponseComplete {
				found[e.Verb] = e
			}
		}
		return found["create"].Verb != "" && found["delete"].Verb != "", sc.Err()
	})
	if err != nil {
		t.Fatalf("the audit log %s lacks the create or the delete of %s (found %v): %v", opts.AuditLogPath(), job.Name, found, err)
	}
	for _, verb := range []string{"create", "delete"} {
		e := found[verb]
		if e.User.Username != "dev-a" {
			t.Errorf("%s recorded as %q, want dev-a", verb, e.User.Username)
		}
		if at := e.StageTimestamp.Time; at.Before(before) || at.After(time.Now()) {
			t.Errorf("%s recorded at %s, want within the test", verb, e.StageTimestamp)
		}
		if e.Level != "Metadata" || e.RequestObject != nil {
			t.Errorf("%s recorded at level %s with a request body: the policy keeps only metadata (a command may carry secrets)", verb, e.Level)
		}
		if e.ResponseStatus == nil || e.ResponseStatus.Code >= 300 {
			t.Errorf("%s recorded with status %v, want success", verb, e.ResponseStatus)
		}
	}
}
