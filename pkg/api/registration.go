package api

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// RegisterModelAnnotation on a TrainJob asks mpijob-manager to register
// the job's model in the Model Registry once the job succeeds: the
// model's NAME[:VERSION] (kubectl mpijob create --register-model, the
// SDK's register_model=). The user writes it; admission checks that the
// user may write to the registry.
const RegisterModelAnnotation = "mpijob.dev/register-model"

// RegisterArtifactAnnotation names, beside RegisterModelAnnotation, the
// artifact to register when the job writes more than one model file
// (--register-artifact).
const RegisterArtifactAnnotation = "mpijob.dev/register-artifact"

// ModelRegistrationAnnotation holds a Registration as JSON: what came of
// registering the job's model. Only mpijob-manager writes it, like
// StatusAnnotation.
const ModelRegistrationAnnotation = "mpijob.dev/model-registration"

// ModelRegistrationFailedWarning is the first sentence of the status of a
// job that succeeded while its model could not be registered (seed 002,
// AF-3): the job stays Succeeded.
const ModelRegistrationFailedWarning = "Training completed, but model upload failed. Manual upload required."

// The states of a Registration.
const (
	// RegistrationDone: the registry holds the model version, with the
	// job's artifact.
	RegistrationDone = "Registered"
	// RegistrationRetrying: the registry did not answer; mpijob-manager
	// tries again at NextTry.
	RegistrationRetrying = "Retrying"
	// RegistrationFailed: it cannot be registered as asked (a version
	// another job holds, no access, no model file); nothing more is tried.
	RegistrationFailed = "Failed"
)

// Registration is what came of registering a job's model.
type Registration struct {
	// Model and Version are what was asked (RegisterModelAnnotation).
	Model   string `json:"model"`
	Version string `json:"version"`
	// State is RegistrationDone, RegistrationRetrying or RegistrationFailed.
	State string `json:"state"`
	// Registry is the registry's address.
	Registry string `json:"registry,omitempty"`
	// URI is the artifact's URI as registered (RegistrationDone).
	URI string `json:"uri,omitempty"`
	// ModelID and VersionID are the registry's ids (RegistrationDone).
	ModelID   string `json:"modelId,omitempty"`
	VersionID string `json:"versionId,omitempty"`
	// Error says what failed, in plain words (not RegistrationDone).
	Error string `json:"error,omitempty"`
	// Command registers it by hand: kubectl mpijob register JOB NAME:VERSION.
	Command string `json:"command,omitempty"`
	// Attempts counts the tries so far.
	Attempts int `json:"attempts"`
	// At is when the last try ended; NextTry when the next one is due.
	At      metav1.Time  `json:"at"`
	NextTry *metav1.Time `json:"nextTry,omitempty"`
}

// ReadRegistration decodes a Registration from a TrainJob's annotations
// (nil, nil when there is none).
func ReadRegistration(annotations map[string]string) (*Registration, error) {
	return readAnnotation[Registration](annotations, ModelRegistrationAnnotation, "registration")
}

// Encode renders r for ModelRegistrationAnnotation.
func (r Registration) Encode() (string, error) {
	b, err := json.Marshal(r)
	return string(b), err
}

// RegisterCommand is the command that registers job's model by hand.
func RegisterCommand(job, model, version, artifact string) string {
	c := CommandPrefix + "register " + job + " " + model + ":" + version
	if artifact != "" {
		c += " --artifact " + artifact
	}
	return c
}

// RegistrationMaxAttempts is how often mpijob-manager tries a registry
// that does not answer before it gives up.
const RegistrationMaxAttempts = 8

// Warning is what a job's status and Event say of a registration that
// failed or waits for the registry: the seed's sentence, what failed, and
// the command that registers it by hand.
func (r Registration) Warning() string {
	s := ModelRegistrationFailedWarning
	if r.Error != "" {
		s += " " + strings.ToUpper(r.Error[:1]) + r.Error[1:]
	}
	if r.State == RegistrationRetrying && r.NextTry != nil {
		s += fmt.Sprintf(" mpijob-manager tries again at %s (attempt %d of %d).", r.NextTry.UTC().Format(time.RFC3339), r.Attempts+1, RegistrationMaxAttempts)
	}
	if r.Command != "" {
		s += " Register it yourself: " + r.Command
	}
	return s
}
