package admission

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
)

// evalConditions evaluates match conditions the way the API server does
// for an admission request: object and oldObject as JSON data (null when
// absent) and the request's operation and user. The webhook is called
// only when every condition holds.
func evalConditions(t *testing.T, conds []admissionregistrationv1.MatchCondition, op, user string, obj, old map[string]any) bool {
	t.Helper()
	vars := map[string]any{
		"object": obj, "oldObject": nil,
		"request": map[string]any{"operation": op, "userInfo": map[string]any{"username": user}},
	}
	if old != nil {
		vars["oldObject"] = old
	}
	for _, c := range conds {
		ok, err := evalCEL(t, c.Expression, vars)
		if err != nil {
			t.Fatalf("%s: %v", c.Name, err)
		}
		if !ok {
			return false
		}
	}
	return true
}

// validateConditions is the shipped match conditions of
// validate.trainjob.mpijob.dev.
func validateConditions(t *testing.T) []admissionregistrationv1.MatchCondition {
	t.Helper()
	for _, obj := range releaseAdmission(t) {
		if cfg, ok := obj.(*admissionregistrationv1.ValidatingWebhookConfiguration); ok {
			for _, w := range cfg.Webhooks {
				if w.Name == "validate.trainjob.mpijob.dev" {
					return w.MatchConditions
				}
			}
		}
	}
	t.Fatal("no validate.trainjob.mpijob.dev in config/webhook")
	return nil
}

// The validating webhook is not called for an update it would let through
// without a look (Trainer's and Kueue's status writes, mpijob-manager's own
// writes), and is called for every update it judges: a new spec (a resume
// included), a change of the annotations (the creator, the manager's
// status, the job's own policy) and a change of the job's Kueue priority
// class (checked against the cluster's classes). Each case evaluates the
// shipped conditions, as the API server does, on an MPI job.
func TestValidateIsCalledForTheUpdatesItJudges(t *testing.T) {
	conds := validateConditions(t)
	const (
		manager = "system:serviceaccount:mpijob-system:mpijob-manager"
		trainer = "system:serviceaccount:kubeflow-system:kubeflow-trainer-controller-manager"
		kueue   = "system:serviceaccount:kueue-system:kueue-controller-manager"
		user    = "dev-a"
	)
	job := func(edit func(metadata, spec, status map[string]any)) map[string]any {
		metadata := map[string]any{
			"name": "j", "namespace": "team-a",
			"labels":      map[string]any{"kueue.x-k8s.io/queue-name": "user-queue", "kueue.x-k8s.io/priority-class": "low"},
			"annotations": map[string]any{"mpijob.dev/creator": "dev-a"},
		}
		spec := map[string]any{"runtimeRef": map[string]any{"name": "mpi-openmpi"}, "suspend": true, "trainer": map[string]any{"numNodes": 2}}
		status := map[string]any{}
		if edit != nil {
			edit(metadata, spec, status)
		}
		return map[string]any{"metadata": metadata, "spec": spec, "status": status}
	}
	cases := map[string]struct {
		op, user string
		edit     func(metadata, spec, status map[string]any)
		want     bool
	}{
		"a create": {op: "CREATE", user: user, want: true},
		"a create by the manager (a per-job runtime's copy)": {op: "CREATE", user: manager, want: true},
		"Trainer writes the status": {op: "UPDATE", user: trainer, edit: func(_, _, st map[string]any) {
			st["conditions"] = []any{map[string]any{"type": "Suspended", "status": "True"}}
		}, want: false},
		"Kueue admits the job (resumes it)": {op: "UPDATE", user: kueue, edit: func(_, sp, _ map[string]any) { sp["suspend"] = false }, want: true},
		"a user resumes the job":            {op: "UPDATE", user: user, edit: func(_, sp, _ map[string]any) { sp["suspend"] = false }, want: true},
		"a user changes the Workers":        {op: "UPDATE", user: user, edit: func(_, sp, _ map[string]any) { sp["trainer"] = map[string]any{"numNodes": 4} }, want: true},
		"a user forges the status annotation": {op: "UPDATE", user: user, edit: func(md, _, _ map[string]any) {
			md["annotations"] = map[string]any{"mpijob.dev/creator": "dev-a", "mpijob.dev/status": "{}"}
		}, want: true},
		"a user removes every annotation": {op: "UPDATE", user: user, edit: func(md, _, _ map[string]any) { delete(md, "annotations") }, want: true},
		"a user changes the priority class": {op: "UPDATE", user: user, edit: func(md, _, _ map[string]any) {
			md["labels"] = map[string]any{"kueue.x-k8s.io/queue-name": "user-queue", "kueue.x-k8s.io/priority-class": "hihg"}
		}, want: true},
		"a user removes every label": {op: "UPDATE", user: user, edit: func(md, _, _ map[string]any) { delete(md, "labels") }, want: true},
		"a user sets a label of their own": {op: "UPDATE", user: user, edit: func(md, _, _ map[string]any) {
			md["labels"] = map[string]any{"kueue.x-k8s.io/queue-name": "user-queue", "kueue.x-k8s.io/priority-class": "low", "team": "vision"}
		}, want: false},
		"the manager writes its status annotation": {op: "UPDATE", user: manager, edit: func(md, _, _ map[string]any) {
			md["annotations"] = map[string]any{"mpijob.dev/creator": "dev-a", "mpijob.dev/status": "{}"}
		}, want: false},
		"the manager suspends the job": {op: "UPDATE", user: manager, edit: func(_, sp, _ map[string]any) { sp["suspend"] = true }, want: false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var old map[string]any
			if tc.op == "UPDATE" {
				old = job(nil)
			}
			got := evalConditions(t, conds, tc.op, tc.user, job(tc.edit), old)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("called (-want +got):\n%s", diff)
			}
		})
	}
}

// The policy that answers while mpijob-manager is down covers exactly the
// requests the validating webhook judges: the same conditions, but the one
// that skips the manager's own updates (the manager is not running then).
func TestManagerDownPolicyMatchesWhatValidateJudges(t *testing.T) {
	var webhook, policy []admissionregistrationv1.MatchCondition
	for _, c := range validateConditions(t) {
		if c.Name != "not-an-update-by-mpijob-manager" {
			webhook = append(webhook, c)
		}
	}
	for _, obj := range releaseAdmission(t) {
		if o, ok := obj.(*admissionregistrationv1.ValidatingAdmissionPolicy); ok && o.Name == "mpijob-manager-running.mpijob.dev" {
			policy = o.Spec.MatchConditions
		}
	}
	if diff := cmp.Diff(webhook, policy); diff != "" {
		t.Errorf("the policy's conditions against the webhook's (-webhook +policy):\n%s", diff)
	}
}
