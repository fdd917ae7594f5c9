package diagnose

import (
	"fmt"
	"strings"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"

	"github.com/mpijob/mpijob/pkg/api"
)

// ReasonModelRegistrationFailed is a job that succeeded while its model,
// which it asked to have registered (--register-model), is not in the
// model registry: the registry refused it or has not answered yet. The
// job stays Succeeded; the status says what failed and the command that
// registers it by hand.
const ReasonModelRegistrationFailed = "ModelRegistrationFailed"

// registration adds to a succeeded job's status what became of the
// registration it asked for (api.RegisterModelAnnotation): registered,
// under way, or failed (a warning, with the command that registers it).
func registration(tj *trainer.TrainJob, s *api.Status) {
	want := tj.Annotations[api.RegisterModelAnnotation]
	if want == "" {
		return
	}
	rec, err := api.ReadRegistration(tj.Annotations)
	switch {
	case err != nil || rec == nil:
		s.Message += fmt.Sprintf(" mpijob-manager is registering its model (%s) in the model registry.", want)
	case rec.State == api.RegistrationDone:
		s.Message += fmt.Sprintf(" Model %s version %s is registered in the model registry (%s).", rec.Model, rec.Version, rec.URI)
	default:
		s.Reason, s.Message = ReasonModelRegistrationFailed, rec.Warning()
		args := []string{rec.Model + ":" + rec.Version}
		if a := tj.Annotations[api.RegisterArtifactAnnotation]; a != "" {
			args = append(args, "--artifact", a)
		}
		what := "Register the model yourself once the registry answers: %s."
		if rec.State == api.RegistrationFailed {
			what = "Register the model yourself, with what the message says changed (another version, or access to the registry): %s."
		}
		s.Steps = ranked(stepf(what, cli("register", args...)))
	}
}

// registrationShown reports whether status s (a finished job's, as
// written) says what tj's registration record says now: a settled job is
// diagnosed again when the record changes (Settled).
func registrationShown(tj *trainer.TrainJob, s api.Status) bool {
	if s.Phase != api.PhaseSucceeded || tj.Annotations[api.RegisterModelAnnotation] == "" {
		return true
	}
	var want api.Status
	registration(tj, &want)
	if want.Reason != "" {
		return s.Reason == want.Reason && s.Message == want.Message
	}
	return s.Reason == "" && strings.HasSuffix(s.Message, want.Message)
}
