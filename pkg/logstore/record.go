package logstore

import (
	"encoding/json"
	"strings"
	"time"
)

// record is a stored line as OpenShift Logging 6 stores it (ViaQ data
// model, Vector's JSON codec): a JSON object whose message is the
// program's line. The local collector writes the same shape, with the
// fields a reader needs (OpenShift's carry more, which readers ignore).
type record struct {
	Timestamp string  `json:"@timestamp"`
	Message   *string `json:"message"`
	LogSource string  `json:"log_source,omitempty"`
	LogType   string  `json:"log_type,omitempty"`
}

// EncodeRecord is the stored line of a program's line written at t.
func EncodeRecord(t time.Time, line string) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // as Vector writes it: <stdout> stays <stdout>
	if err := enc.Encode(record{Timestamp: t.UTC().Format(time.RFC3339Nano), Message: &line, LogSource: "container", LogType: LogTypeApplication}); err != nil {
		// A string always encodes (invalid UTF-8 becomes U+FFFD).
		return line
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// MessageOf is the program's line of a stored line: the message of a
// record, or the stored line itself when it is no record (a store fed by
// a collector that stores lines as they are).
func MessageOf(stored string) string {
	if !strings.HasPrefix(stored, "{") {
		return stored
	}
	var r record
	if err := json.Unmarshal([]byte(stored), &r); err != nil || r.Message == nil {
		return stored
	}
	return *r.Message
}
