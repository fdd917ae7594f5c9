// Package logs is what the CLI does to pod logs: merge several pods' logs
// by their timestamps, and hide secrets before they reach a terminal or a
// notebook (PEM blocks, bearer tokens, cloud keys, and the values of
// password=, token=, secret=, api_key= style settings). The Python SDK
// follows the same rules.
package logs

import (
	"regexp"
	"strings"
)

// Mask replaces what a rule hides.
const Mask = "[REDACTED]"

// rule is a pattern with cheap substrings (of the lowercased line), one
// of which must occur for the pattern to be tried at all.
type rule struct {
	hints []string
	re    *regexp.Regexp
}

var rules = []rule{
	// key=value and key: value settings whose name says secret.
	{[]string{"pass", "pwd", "secret", "token", "key"}, regexp.MustCompile(`(?i)((?:password|passwd|pwd|secret|token|api[_-]?key|access[_-]?key|private[_-]?key|client[_-]?secret)[A-Za-z0-9_-]*["']?\s*[:=]\s*["']?)([^\s"',;&]+)`)},
	// Authorization headers and bearer tokens.
	{[]string{"bearer"}, regexp.MustCompile(`(?i)(bearer\s+)([A-Za-z0-9._~+/=-]{8,})`)},
	// AWS access key ids, GitHub and Hugging Face tokens, JWTs.
	{[]string{"akia", "gh", "hf_", "eyj"}, regexp.MustCompile(`()\b(AKIA[0-9A-Z]{16}|gh[pousr]_[A-Za-z0-9]{30,}|hf_[A-Za-z0-9]{30,}|eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,})\b`)},
	// Credentials in URLs: scheme://user:password@host.
	{[]string{"://"}, regexp.MustCompile(`(://[^/\s:@]+:)([^@\s/]+)(@)`)},
}

func hinted(lower string, hints []string) bool {
	for _, h := range hints {
		if strings.Contains(lower, h) {
			return true
		}
	}
	return false
}

// Redactor hides secrets line by line; it remembers whether it is inside a
// PEM block, so feed it a stream's lines in order.
type Redactor struct {
	inPEM bool
	// Count is how many secrets were hidden so far.
	Count int
}

// Line returns line with its secrets masked.
func (r *Redactor) Line(line string) string {
	if r.inPEM {
		if strings.Contains(line, "-----END ") {
			r.inPEM = false
		}
		return Mask
	}
	if i := strings.Index(line, "-----BEGIN "); i >= 0 && strings.Contains(line[i:], "PRIVATE KEY") || i >= 0 && strings.Contains(line[i:], "CERTIFICATE") {
		r.Count++
		if !strings.Contains(line[i+11:], "-----END ") {
			r.inPEM = true
		}
		return line[:i] + Mask
	}
	lower := strings.ToLower(line)
	for _, ru := range rules {
		if !hinted(lower, ru.hints) {
			continue
		}
		re := ru.re
		line = re.ReplaceAllStringFunc(line, func(m string) string {
			r.Count++
			sub := re.FindStringSubmatch(m)
			out := sub[1] + Mask
			if len(sub) > 3 {
				out += sub[3]
			}
			return out
		})
	}
	return line
}

// String masks the secrets of a whole text.
func String(s string) (string, int) {
	r := &Redactor{}
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = r.Line(l)
	}
	return strings.Join(lines, "\n"), r.Count
}
