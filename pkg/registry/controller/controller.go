// Package controller registers the model of a job that asked for it
// (api.RegisterModelAnnotation: kubectl mpijob create --register-model, the
// SDK's register_model=) once the job succeeds, and records what came of
// it on the job (api.ModelRegistrationAnnotation), which the diagnosis
// turns into the job's status: Succeeded with a warning and the one
// command that registers it later when the registry refused or did not
// answer. A registration that fails loses nothing: the job, its artifacts
// and its phase stay as they are.
//
// gather (the job, its registration so far) → decide (Next, pure) →
// apply (the registry, then the record and an Event).
package controller

import (
	"context"
	"errors"
	"fmt"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/mpijob/mpijob/pkg/api"
	"github.com/mpijob/mpijob/pkg/registry"
)

// FieldManager owns the registration record on a TrainJob.
const FieldManager = "mpijob-manager-registry"

// EventRegistered is the Event of a model registered.
const EventRegistered = "ModelRegistered"

// Retry policy: a registry that does not answer is tried again after
// FirstRetry, doubling up to MaxRetryInterval, MaxAttempts times in all
// (about 40 minutes); then the record says Failed, with the command.
const (
	FirstRetry       = 30 * time.Second
	MaxRetryInterval = 10 * time.Minute
	MaxAttempts      = api.RegistrationMaxAttempts
)

// Reconciler registers succeeded jobs' models.
type Reconciler struct {
	// Client reads TrainJobs (the manager's cache) and writes the record.
	Client client.Client
	// Direct reads what the cache keeps no copy of: the job's runtime as
	// it is and its data connection's Secret (the manager caches no
	// Secrets), where ClusterRole mpijob-model-registration lets it.
	Direct client.Client
	// Config reaches the API server as the manager (its token is the one
	// the registry gets).
	Config *rest.Config
	// Service is the registry's Service, NAMESPACE/NAME.
	Service string
	// CA is a PEM file of the CA that signed the registry's certificate ("": the system's).
	CA string
	// Transport, when set, is the registry (tests); nil resolves Service.
	Transport registry.Transport
	// Recorder writes the Events.
	Recorder events.EventRecorder
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// SetupWithManager registers the controller: it wakes for TrainJobs that
// ask for a registration and have succeeded, until the record says it is
// done or failed.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).Named("registry").
		For(&trainer.TrainJob{}, builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			tj, ok := o.(*trainer.TrainJob)
			return ok && asks(tj)
		}))).
		// mpijob's status lives in the job's JobStatus: its Succeeded
		// wakes the job's registration.
		Watches(&api.JobStatus{}, handler.EnqueueRequestForOwner(mgr.GetScheme(), mgr.GetRESTMapper(), &trainer.TrainJob{}, handler.OnlyControllerOwner()),
			builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
				s, ok := o.(*api.JobStatus)
				return ok && s.Phase == string(api.PhaseSucceeded)
			}))).
		Complete(r)
}

// asks reports whether tj asks for a registration and Trainer says it is
// complete: what a TrainJob alone says of Pending.
func asks(tj *trainer.TrainJob) bool {
	return tj.Annotations[api.RegisterModelAnnotation] != "" && tj.DeletionTimestamp == nil &&
		meta.IsStatusConditionTrue(tj.Status.Conditions, trainer.TrainJobComplete)
}

// Pending reports whether tj has a registration to make now or later: it
// asks for one, it succeeded as mpijob's status says (written after the
// job's last progress report is published, so the metrics registered are
// the final ones), and no record says done or failed for what it asks.
func Pending(tj *trainer.TrainJob) bool {
	want := tj.Annotations[api.RegisterModelAnnotation]
	if !asks(tj) {
		return false
	}
	if s, found, err := api.ReadStatus(tj.Annotations); err != nil || !found || s.Phase != api.PhaseSucceeded {
		return false
	}
	rec, err := api.ReadRegistration(tj.Annotations)
	if err != nil || rec == nil {
		return true
	}
	ref, err := registry.ParseRef("--register-model", want, tj.Name)
	if err != nil {
		return rec.State != api.RegistrationFailed
	}
	return rec.Model != ref.Name || rec.Version != ref.Version || rec.State == api.RegistrationRetrying
}

// Reconcile registers one job's model when it is due.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	tj := &trainer.TrainJob{}
	if err := r.Client.Get(ctx, req.NamespacedName, tj); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	js := &api.JobStatus{}
	if err := r.Client.Get(ctx, req.NamespacedName, js); err == nil {
		api.JoinStatus(&tj.ObjectMeta, js)
	} else if !apierrors.IsNotFound(err) {
		return reconcile.Result{}, err
	}
	if !Pending(tj) {
		return reconcile.Result{}, nil
	}
	now := r.now()
	prev, _ := api.ReadRegistration(tj.Annotations)
	want := tj.Annotations[api.RegisterModelAnnotation]
	artifact := tj.Annotations[api.RegisterArtifactAnnotation]
	ref, refErr := registry.ParseRef("--register-model", want, tj.Name)
	if refErr == nil && prev != nil && prev.Model == ref.Name && prev.Version == ref.Version &&
		prev.State == api.RegistrationRetrying && prev.NextTry != nil && prev.NextTry.After(now) {
		return reconcile.Result{RequeueAfter: prev.NextTry.Sub(now)}, nil
	}
	var res registry.Result
	var uri string
	err := refErr
	if err == nil {
		uri, res, err = r.register(ctx, tj, ref, artifact)
	}
	if refErr != nil {
		ref = registry.Ref{Name: want}
	}
	rec := Next(prev, Attempt{Job: tj.Name, Ref: ref, Artifact: artifact, Registry: r.where(), URI: uri, Result: res, Err: err}, now)
	if err := r.record(ctx, tj, rec); err != nil {
		return reconcile.Result{}, err
	}
	r.emit(tj, prev, rec)
	if rec.State == api.RegistrationRetrying && rec.NextTry != nil {
		return reconcile.Result{RequeueAfter: rec.NextTry.Sub(now)}, nil
	}
	return reconcile.Result{}, nil
}

// register reads the job's model as the registration writes it and
// registers it.
func (r *Reconciler) register(ctx context.Context, tj *trainer.TrainJob, ref registry.Ref, artifact string) (string, registry.Result, error) {
	t := r.Transport
	if t == nil {
		token, err := registry.TokenOf(r.Config)
		if err != nil {
			return "", registry.Result{}, err
		}
		if t, err = registry.Resolve(ctx, r.Direct, "--model-registry", r.Service, "", r.CA, token); err != nil {
			return "", registry.Result{}, err
		}
	}
	m, err := registry.FromJob(ctx, r.Direct, r.Config, nil, tj, ref, artifact)
	if err != nil {
		return "", registry.Result{}, err
	}
	// The author is who created the job, not the manager that writes it.
	m.Author = tj.Annotations[api.CreatorAnnotation]
	res, err := registry.Client{T: t}.Register(ctx, m)
	return m.URI, res, err
}

func (r *Reconciler) where() string {
	if r.Transport != nil {
		return r.Transport.Where()
	}
	return r.Service
}

func (r *Reconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// record writes rec on tj, under the controller's own field owner.
func (r *Reconciler) record(ctx context.Context, tj *trainer.TrainJob, rec api.Registration) error {
	raw, err := rec.Encode()
	if err != nil {
		return err
	}
	u := api.AnnotationOf(tj, api.ModelRegistrationAnnotation, raw)
	if err := r.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(FieldManager), client.ForceOwnership); err != nil {
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			return nil // gone, or another job of the name: nothing to record
		}
		return fmt.Errorf("failed to record the model registration of %s/%s: %w", tj.Namespace, tj.Name, err)
	}
	return nil
}

// emit writes the Event of a registration done. A failure's Warning
// Event is the diagnosis's: the status turns to ModelRegistrationFailed,
// and that transition's Event (one, vouched for by the status) says what
// failed and the command.
func (r *Reconciler) emit(tj *trainer.TrainJob, prev *api.Registration, rec api.Registration) {
	if r.Recorder == nil || rec.State != api.RegistrationDone {
		return
	}
	if prev != nil && prev.State == rec.State && prev.Model == rec.Model && prev.Version == rec.Version {
		return
	}
	r.Recorder.Eventf(tj, nil, corev1.EventTypeNormal, EventRegistered, "Register", "Model %s version %s is in the model registry: %s", rec.Model, rec.Version, rec.URI)
}

// Attempt is one try at a registration and what came of it.
type Attempt struct {
	Job      string
	Ref      registry.Ref
	Artifact string
	Registry string
	URI      string
	Result   registry.Result
	Err      error
}

// Next is the record after attempt a, given the record before it (nil:
// none). Pure: a registry that did not answer (or failed inside) is tried
// again with a growing wait until MaxAttempts; what the request itself
// gets wrong (a version another job holds, no access, no data connection,
// no model file) is Failed at once.
func Next(prev *api.Registration, a Attempt, now time.Time) api.Registration {
	rec := api.Registration{
		Model: a.Ref.Name, Version: a.Ref.Version, Registry: a.Registry, Attempts: 1, At: metav1.NewTime(now),
		Command: api.RegisterCommand(a.Job, a.Ref.Name, a.Ref.Version, a.Artifact),
	}
	if prev != nil && prev.Model == rec.Model && prev.Version == rec.Version {
		rec.Attempts = prev.Attempts + 1
	}
	if a.Err == nil {
		rec.State, rec.URI, rec.ModelID, rec.VersionID, rec.Command = api.RegistrationDone, a.URI, a.Result.ModelID, a.Result.VersionID, ""
		return rec
	}
	rec.Error = sentence(a.Err.Error())
	if !Retryable(a.Err) || rec.Attempts >= MaxAttempts {
		rec.State = api.RegistrationFailed
		if Retryable(a.Err) {
			rec.Error += fmt.Sprintf(" mpijob-manager gave up after %d attempts.", rec.Attempts)
		}
		return rec
	}
	wait := FirstRetry << (rec.Attempts - 1)
	if wait > MaxRetryInterval || wait <= 0 {
		wait = MaxRetryInterval
	}
	rec.State, rec.NextTry = api.RegistrationRetrying, ptrTime(now.Add(wait))
	return rec
}

// Retryable reports an error that may pass by itself: the registry (or
// the store) did not answer or failed inside. A refusal of the request
// (taken, access, bad input, no storage) does not.
func Retryable(err error) bool {
	var un *registry.UnreachableError
	if errors.As(err, &un) {
		return true
	}
	var acc *registry.AccessError
	if errors.As(err, &acc) || registry.IsUserError(err) || apierrors.IsForbidden(err) || apierrors.IsNotFound(err) {
		return false
	}
	var typo *registry.TypoError
	return !errors.As(err, &typo)
}

func sentence(s string) string {
	if s == "" || s[len(s)-1] == '.' {
		return s
	}
	return s + "."
}

func ptrTime(t time.Time) *metav1.Time {
	m := metav1.NewTime(t)
	return &m
}
