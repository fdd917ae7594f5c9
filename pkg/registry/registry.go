// Package registry registers a finished MPI job's model in a Kubeflow Model
// Registry (OpenShift AI's Model Registry): the model's artifact URI in the
// form OpenShift AI's dashboard reads back, its format, the job's metrics
// and where it came from. What is registered is decided by pure functions
// (Ref, PickModel, ArtifactURI, Model.payloads) from model-rules.json, which
// the SDK ships too; Client carries it out against the registry's REST API,
// through the API server's service proxy as the user, or at a URL.
package registry

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"net/url"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

//go:embed model-rules.json
var rulesJSON []byte

// Rules are model-rules.json.
type Rules struct {
	Name    NameRule `json:"name"`
	Version NameRule `json:"version"`
	Formats []struct {
		Suffix  string `json:"suffix"`
		Format  string `json:"format"`
		Version string `json:"version"`
	} `json:"formats"`
	ModelPrefix    string   `json:"model_prefix"`
	Metrics        []string `json:"metrics"`
	PropertyPrefix string   `json:"property_prefix"`
}

// NameRule is what a model's name or version may be.
type NameRule struct {
	Pattern string `json:"pattern"`
	Max     int    `json:"max"`
	Fix     string `json:"fix"`
	re      *regexp.Regexp
}

// rules are the loaded rules.
var rules = func() Rules {
	var r Rules
	if err := json.Unmarshal(rulesJSON, &r); err != nil {
		panic(fmt.Sprintf("model-rules.json: %v", err))
	}
	r.Name.re = regexp.MustCompile(r.Name.Pattern)
	r.Version.re = regexp.MustCompile(r.Version.Pattern)
	return r
}()

// FieldError is bad input: the field, the value and the fix.
type FieldError struct{ Field, Value, Fix string }

func (e *FieldError) Error() string {
	return fmt.Sprintf("%s %q: %s", e.Field, e.Value, e.Fix)
}

// Ref is a model's name and version, as NAME[:VERSION] gives them.
type Ref struct{ Name, Version string }

func (r Ref) String() string { return r.Name + ":" + r.Version }

// ParseRef reads NAME[:VERSION]; a missing version is defaultVersion (the
// job's name). field names the input in errors ("NAME[:VERSION]",
// "--register-model").
func ParseRef(field, s, defaultVersion string) (Ref, error) {
	name, version, hasVersion := strings.Cut(strings.TrimSpace(s), ":")
	if !hasVersion {
		version = defaultVersion
	}
	if !rules.Name.re.MatchString(name) {
		return Ref{}, &FieldError{Field: field + " (model name)", Value: name, Fix: rules.Name.Fix}
	}
	if !rules.Version.re.MatchString(version) {
		return Ref{}, &FieldError{Field: field + " (version)", Value: version, Fix: rules.Version.Fix}
	}
	return Ref{Name: name, Version: version}, nil
}

// FormatOf is a model file's format and format version, from its name
// (ok false: not a model format mpijob knows).
func FormatOf(file string) (format, version string, ok bool) {
	lower := strings.ToLower(file)
	for _, f := range rules.Formats {
		if strings.HasSuffix(lower, f.Suffix) {
			return f.Format, f.Version, true
		}
	}
	return "", "", false
}

// PickModel chooses the artifact to register among a job's artifacts:
// chosen when given (it must be one of them), else the one model file
// (model.* of a known format).
func PickModel(job string, artifacts []string, chosen string) (string, error) {
	sort.Strings(artifacts)
	if chosen != "" {
		for _, a := range artifacts {
			if a == chosen {
				return a, nil
			}
		}
		return "", &FieldError{Field: "--artifact", Value: chosen,
			Fix: fmt.Sprintf("job %s has no such artifact; it has %s (kubectl mpijob artifacts %s)", job, listOrNone(artifacts), job)}
	}
	var models []string
	for _, a := range artifacts {
		if IsModelFile(a) {
			models = append(models, a)
		}
	}
	switch len(models) {
	case 1:
		return models[0], nil
	case 0:
		return "", fmt.Errorf("job %s wrote no model file (model.onnx, model.pt, model.npz, ...) to $MPIJOB_OUTPUT_URI; it has %s: name the file with --artifact NAME", job, listOrNone(artifacts))
	}
	return "", fmt.Errorf("job %s wrote %d model files (%s): name the one to register with --artifact NAME", job, len(models), strings.Join(models, ", "))
}

// IsModelFile reports a model file: model.* of a format FormatOf knows.
func IsModelFile(name string) bool {
	_, _, ok := FormatOf(name)
	return ok && strings.HasPrefix(name[strings.LastIndex(name, "/")+1:], rules.ModelPrefix)
}

func listOrNone(names []string) string {
	if len(names) == 0 {
		return "no artifacts"
	}
	return strings.Join(names, ", ")
}

// S3URI is an object's URI in the form OpenShift AI's dashboard reads back:
// s3://BUCKET/KEY?endpoint=ENDPOINT&defaultRegion=REGION.
func S3URI(bucket, key, endpoint, region string) string {
	q := url.Values{}
	q.Set("endpoint", endpoint)
	if region != "" {
		q.Set("defaultRegion", region)
	}
	return "s3://" + bucket + "/" + strings.TrimPrefix(key, "/") + "?" + q.Encode()
}

// PVCURI is a file's URI on a PersistentVolumeClaim: pvc://CLAIM/PATH.
func PVCURI(claim, path string) string {
	return "pvc://" + claim + "/" + strings.TrimPrefix(path, "/")
}

// Model is what one registration writes.
type Model struct {
	Ref
	// URI is the model artifact's (S3URI or PVCURI); Artifact its name.
	URI, Artifact string
	// Format and FormatVersion are the model's (FormatOf).
	Format, FormatVersion string
	// Author is who registers it (the user); Description says from what.
	Author, Description string
	// Metrics are the job's last reported figures (accuracy, loss, ...).
	Metrics map[string]float64
	// Provenance says where the model came from: namespace, job, uid,
	// runtime, workers, image, creator (kept as mpijob.* properties).
	Provenance map[string]string
}

// JobUIDProperty is the property that says which job a version came from:
// the same job registered again changes nothing.
func JobUIDProperty() string { return rules.PropertyPrefix + "uid" }

// properties are the registry's customProperties of m's version.
func (m Model) properties() map[string]any {
	out := map[string]any{}
	for k, v := range m.Metrics {
		out[k] = map[string]any{"metadataType": "MetadataDoubleValue", "double_value": v}
	}
	for k, v := range m.Provenance {
		out[rules.PropertyPrefix+k] = map[string]any{"metadataType": "MetadataStringValue", "string_value": v}
	}
	return out
}

// payloads are the bodies of the three creates: the registered model, its
// version and the version's model artifact.
func (m Model) payloads() (model, version, artifact map[string]any) {
	model = map[string]any{"name": m.Name, "owner": m.Author}
	version = map[string]any{"name": m.Version, "author": m.Author, "description": m.Description, "customProperties": m.properties()}
	// The artifact takes the model's name, as the registry's own Python
	// client names it (and finds it: get_model_artifact(name, version));
	// the file's name is in its URI.
	artifact = map[string]any{"artifactType": "model-artifact", "name": m.Name, "uri": m.URI,
		"modelFormatName": m.Format, "modelFormatVersion": m.FormatVersion, "description": m.Description}
	if m.FormatVersion == "" {
		delete(artifact, "modelFormatVersion")
	}
	if m.Format == "" {
		delete(artifact, "modelFormatName")
	}
	return model, version, artifact
}

// FormatFloat writes a metric as the registry's dashboard shows it.
func FormatFloat(v float64) string { return strconv.FormatFloat(v, 'g', 6, 64) }
