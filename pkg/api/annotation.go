package api

import (
	"encoding/json"
	"fmt"
)

// readAnnotation decodes the JSON that mpijob-manager keeps in annotation
// key of a TrainJob (what names it in errors): nil, nil when there is none
// (absent, or emptied by an apply that takes it back).
func readAnnotation[T any](annotations map[string]string, key, what string) (*T, error) {
	raw, ok := annotations[key]
	if !ok || raw == "" {
		return nil, nil
	}
	v := new(T)
	if err := json.Unmarshal([]byte(raw), v); err != nil {
		return nil, fmt.Errorf("annotation %s is not a valid %s: %w", key, what, err)
	}
	return v, nil
}
