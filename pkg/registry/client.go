package registry

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"
)

// APIPath is the registry's REST API.
const APIPath = "/api/model_registry/v1alpha3"

// URLAnnotation on a registry's Service is the address of its REST API
// (the local cluster's gateway). OpenShift AI's registries say where their
// REST route is with ODHRESTAnnotation (host:port, HTTPS).
const (
	URLAnnotation     = "mpijob.dev/registry-url"
	ODHRESTAnnotation = "routing.opendatahub.io/external-address-rest"
)

// AddressOf is the REST address a registry's Service annotations name
// ("" when none does).
func AddressOf(annotations map[string]string) string {
	if u := strings.TrimSpace(annotations[URLAnnotation]); u != "" {
		return u
	}
	if hp := strings.TrimSpace(annotations[ODHRESTAnnotation]); hp != "" {
		return "https://" + hp
	}
	return ""
}

// Transport sends one request to the registry's REST API (path under
// APIPath) and returns the answer's status code and body; err is for a
// registry that could not be reached at all.
type Transport interface {
	Do(ctx context.Context, method, path string, query url.Values, body []byte) (int, []byte, error)
	// Where says where the registry is, for messages.
	Where() string
}

// Direct reaches a registry at a URL (OpenShift AI's registry Route, for
// example), with a bearer token and, for a private CA, its certificate.
type Direct struct {
	URL   string
	Token string
	HTTP  *http.Client
}

// NewDirect is a Direct transport; caFile is a PEM file ("" for the
// system's roots).
func NewDirect(rawURL, token, caFile string) (*Direct, error) {
	u, err := url.Parse(strings.TrimRight(rawURL, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, &FieldError{Field: "--registry-url", Value: rawURL, Fix: "give the registry's REST address, e.g. https://my-registry-rest.apps.example.com"}
	}
	hc := &http.Client{Timeout: 30 * time.Second}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, &FieldError{Field: "--registry-ca", Value: caFile, Fix: "give a PEM file of the CA that signed the registry's certificate: " + err.Error()}
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, &FieldError{Field: "--registry-ca", Value: caFile, Fix: "the file holds no PEM certificate"}
		}
		hc.Transport = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}
	}
	return &Direct{URL: u.String(), Token: token, HTTP: hc}, nil
}

// Where is the URL.
func (d *Direct) Where() string { return d.URL }

// Do sends the request to the URL.
func (d *Direct) Do(ctx context.Context, method, path string, query url.Values, body []byte) (int, []byte, error) {
	u := d.URL + APIPath + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if d.Token != "" {
		req.Header.Set("Authorization", "Bearer "+d.Token)
	}
	resp, err := d.HTTP.Do(req)
	if err != nil {
		return 0, nil, &UnreachableError{Where: d.URL, Err: err}
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return 0, nil, &UnreachableError{Where: d.URL, Err: err}
	}
	switch resp.StatusCode {
	case http.StatusUnauthorized, http.StatusForbidden:
		return 0, nil, &AccessError{Where: d.URL, Err: fmt.Errorf("%s: %s", resp.Status, strings.TrimSpace(string(b)))}
	case http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return 0, nil, &UnreachableError{Where: d.URL, Err: fmt.Errorf("%s", resp.Status)}
	}
	return resp.StatusCode, b, nil
}

// UnreachableError is a registry that did not answer.
type UnreachableError struct {
	Where string
	Err   error
}

func (e *UnreachableError) Error() string {
	return fmt.Sprintf("the model registry (%s) could not be reached: %v", e.Where, e.Err)
}
func (e *UnreachableError) Unwrap() error { return e.Err }

// AccessError is a registry that refused the caller.
type AccessError struct {
	Where string
	Err   error
}

func (e *AccessError) Error() string {
	return fmt.Sprintf("you may not use the model registry (%s): %v", e.Where, e.Err)
}
func (e *AccessError) Unwrap() error { return e.Err }

// TakenError is a version of the model that exists already, registered
// from another job (or by hand).
type TakenError struct {
	Ref  Ref
	From string // the job it came from ("namespace/name"), "" when unknown
}

func (e *TakenError) Error() string {
	from := "registered by hand or by another tool"
	if e.From != "" {
		from = "registered from job " + e.From
	}
	return fmt.Sprintf("version %s of model %s exists already (%s): give another version, NAME:VERSION", e.Ref.Version, e.Ref.Name, from)
}

// Client registers models through a Transport.
type Client struct{ T Transport }

// Result is what a registration did.
type Result struct {
	ModelID, VersionID, ArtifactID string
	// Unchanged: the same job's model was registered under this version
	// already; nothing was written.
	Unchanged bool
	// NewModel: the registered model was created by this registration.
	NewModel bool
}

// Entity is a registered model, a model version or an artifact, as the
// registry's REST API shows it (the fields mpijob reads).
type Entity struct {
	ID               string         `json:"id"`
	Name             string         `json:"name"`
	URI              string         `json:"uri"`
	CustomProperties map[string]any `json:"customProperties"`
}

type entityList struct {
	Items []Entity `json:"items"`
}

// call sends a request and decodes a 2xx answer into out; a 404 or a 409
// is returned as its code, without an error.
func (c Client) call(ctx context.Context, method, path string, query url.Values, in, out any) (code int, err error) {
	var body []byte
	if in != nil {
		if body, err = json.Marshal(in); err != nil {
			return 0, err
		}
	}
	code, raw, err := c.T.Do(ctx, method, path, query, body)
	if err != nil {
		return 0, err
	}
	if code >= 200 && code < 300 {
		if out != nil {
			if err := json.Unmarshal(raw, out); err != nil {
				return code, fmt.Errorf("the model registry (%s) answered %s %s with what is not JSON: %w", c.T.Where(), method, path, err)
			}
		}
		return code, nil
	}
	if code == http.StatusNotFound || code == http.StatusConflict {
		return code, nil
	}
	var msg struct {
		Message string `json:"message"`
	}
	_ = json.Unmarshal(raw, &msg)
	if msg.Message == "" {
		msg.Message = strings.TrimSpace(string(raw))
	}
	return code, fmt.Errorf("the model registry (%s) refused %s %s: %d %s", c.T.Where(), method, path, code, msg.Message)
}

// FindModel is the registered model named name (nil: none).
func (c Client) FindModel(ctx context.Context, name string) (*Entity, error) {
	e := &Entity{}
	code, err := c.call(ctx, http.MethodGet, "/registered_model", url.Values{"name": {name}}, nil, e)
	if err != nil || code == http.StatusNotFound {
		return nil, err
	}
	return e, nil
}

// ModelNames are the names of every registered model (for a typo's
// suggestion), at most the first 1,000.
func (c Client) ModelNames(ctx context.Context) ([]string, error) {
	l := &entityList{}
	if _, err := c.call(ctx, http.MethodGet, "/registered_models", url.Values{"pageSize": {"1000"}}, nil, l); err != nil {
		return nil, err
	}
	var out []string
	for _, e := range l.Items {
		out = append(out, e.Name)
	}
	return out, nil
}

// Register writes m: the registered model (when new), its version with
// the job's metrics and provenance, and the version's model artifact. The
// same job registered again under the same version changes nothing; a
// version left without its artifact by a registration that stopped half
// way gets it.
func (c Client) Register(ctx context.Context, m Model) (Result, error) {
	var res Result
	model, version, artifact := m.payloads()
	rm, err := c.FindModel(ctx, m.Name)
	if err != nil {
		return res, err
	}
	if rm == nil {
		rm = &Entity{}
		code, err := c.call(ctx, http.MethodPost, "/registered_models", nil, model, rm)
		if err != nil {
			return res, err
		}
		if code == http.StatusConflict { // made meanwhile
			if rm, err = c.FindModel(ctx, m.Name); err != nil || rm == nil {
				return res, fmt.Errorf("model %s was made by someone else meanwhile and cannot be read: %w", m.Name, err)
			}
		} else {
			res.NewModel = true
		}
	}
	res.ModelID = rm.ID
	mv := &Entity{}
	code, err := c.call(ctx, http.MethodGet, "/model_version", url.Values{"name": {m.Version}, "parentResourceId": {rm.ID}}, nil, mv)
	if err != nil {
		return res, err
	}
	if code == http.StatusNotFound {
		version["registeredModelId"] = rm.ID
		mv = &Entity{}
		if code, err = c.call(ctx, http.MethodPost, "/model_versions", nil, version, mv); err != nil {
			return res, err
		}
		if code == http.StatusConflict {
			return res, &TakenError{Ref: m.Ref}
		}
	} else if uid := stringProperty(mv.CustomProperties, JobUIDProperty()); uid != m.Provenance["uid"] {
		return res, &TakenError{Ref: m.Ref, From: jobOf(mv.CustomProperties)}
	}
	res.VersionID = mv.ID
	arts := &entityList{}
	if _, err := c.call(ctx, http.MethodGet, "/model_versions/"+url.PathEscape(mv.ID)+"/artifacts", nil, nil, arts); err != nil {
		return res, err
	}
	for _, a := range arts.Items {
		if a.URI == m.URI {
			// Only an existing version can hold it: nothing was written.
			res.ArtifactID, res.Unchanged = a.ID, true
			return res, nil
		}
	}
	a := &Entity{}
	if _, err := c.call(ctx, http.MethodPost, "/model_versions/"+url.PathEscape(mv.ID)+"/artifacts", nil, artifact, a); err != nil {
		return res, err
	}
	res.ArtifactID = a.ID
	return res, nil
}

func stringProperty(props map[string]any, key string) string {
	p, _ := props[key].(map[string]any)
	s, _ := p["string_value"].(string)
	return s
}

func jobOf(props map[string]any) string {
	ns, job := stringProperty(props, rules.PropertyPrefix+"namespace"), stringProperty(props, rules.PropertyPrefix+"job")
	if job == "" {
		return ""
	}
	return ns + "/" + job
}
