package registry

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

type vectors struct {
	Refs []struct {
		Name, Input    string
		DefaultVersion string `json:"default_version"`
		Want           *Ref
		Error          string
	}
	Formats []struct {
		File    string
		Format  *string
		Version string
	}
	Picks []struct {
		Name      string
		Artifacts []string
		Chosen    string
		Want      string
		Error     string
	}
	URIs []struct {
		Name, Bucket, Key, Endpoint, Region, Want string
	}
}

func load(t *testing.T) vectors {
	t.Helper()
	b, err := os.ReadFile("testdata/vectors.json")
	if err != nil {
		t.Fatal(err)
	}
	var v vectors
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

func TestParseRef(t *testing.T) {
	for _, tc := range load(t).Refs {
		t.Run(tc.Name, func(t *testing.T) {
			got, err := ParseRef("NAME[:VERSION]", tc.Input, tc.DefaultVersion)
			if tc.Error != "" {
				if err == nil || !strings.Contains(err.Error(), tc.Error) || !strings.Contains(err.Error(), "NAME[:VERSION]") {
					t.Fatalf("ParseRef(%q) = %v, %v; want an error naming the field and %q", tc.Input, got, err, tc.Error)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(*tc.Want, got); diff != "" {
				t.Errorf("ParseRef(%q) (-want +got):\n%s", tc.Input, diff)
			}
		})
	}
}

func TestFormatOf(t *testing.T) {
	for _, tc := range load(t).Formats {
		t.Run(tc.File, func(t *testing.T) {
			f, v, ok := FormatOf(tc.File)
			if tc.Format == nil {
				if ok {
					t.Errorf("FormatOf(%q) = %s, want no format", tc.File, f)
				}
				return
			}
			if !ok || f != *tc.Format || v != tc.Version {
				t.Errorf("FormatOf(%q) = %q %q %v, want %q %q", tc.File, f, v, ok, *tc.Format, tc.Version)
			}
		})
	}
}

func TestPickModel(t *testing.T) {
	for _, tc := range load(t).Picks {
		t.Run(tc.Name, func(t *testing.T) {
			got, err := PickModel("digits", tc.Artifacts, tc.Chosen)
			if tc.Error != "" {
				if err == nil || !strings.Contains(err.Error(), tc.Error) {
					t.Fatalf("PickModel = %q, %v; want an error with %q", got, err, tc.Error)
				}
				return
			}
			if err != nil || got != tc.Want {
				t.Errorf("PickModel = %q, %v; want %q", got, err, tc.Want)
			}
		})
	}
}

func TestS3URI(t *testing.T) {
	for _, tc := range load(t).URIs {
		t.Run(tc.Name, func(t *testing.T) {
			if got := S3URI(tc.Bucket, tc.Key, tc.Endpoint, tc.Region); got != tc.Want {
				t.Errorf("S3URI = %s, want %s", got, tc.Want)
			}
		})
	}
}

// The SDK ships the same rules (sdk/python/mpijob/model-rules.json).
func TestSDKShipsTheRules(t *testing.T) {
	sdk, err := os.ReadFile("../../sdk/python/mpijob/model-rules.json")
	if err != nil {
		t.Fatal(err)
	}
	if string(sdk) != string(rulesJSON) {
		t.Error("sdk/python/mpijob/model-rules.json differs from pkg/registry/model-rules.json: copy it (cp pkg/registry/model-rules.json sdk/python/mpijob/)")
	}
}
