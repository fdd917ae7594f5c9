// Package logs is what the CLI does to pod logs: merge several pods' logs
// by their timestamps, and hide secrets before they reach a terminal or a
// notebook (PEM blocks, bearer tokens, cloud keys, and the values of
// password=, token=, secret=, api_key= style settings). The Python SDK
// follows the same rules.
package logs

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"unicode"
)

// Mask replaces what a rule hides.
const Mask = "[REDACTED]"

// RulesJSON is the rules as data: the Python SDK ships the same file.
//
//go:embed redact-rules.json
var RulesJSON []byte

// rule is a pattern with cheap substrings (of the lowercased line), one
// of which must occur for the pattern to be tried at all. Its three
// groups are what is kept before, the secret, and what is kept after.
type rule struct {
	hints   []string
	re      *regexp.Regexp
	require []string
}

var rules, pemMaxLines = mustRules(RulesJSON)

func mustRules(b []byte) ([]rule, int) {
	var doc struct {
		Mask        string `json:"mask"`
		PEMMaxLines int    `json:"pemMaxLines"`
		Rules       []struct {
			Name, Pattern string
			Hints         []string
			Require       []string
		} `json:"rules"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		panic(fmt.Sprintf("redact-rules.json: %v", err))
	}
	if doc.Mask != Mask {
		panic(fmt.Sprintf("redact-rules.json: mask %q, want %q", doc.Mask, Mask))
	}
	out := make([]rule, 0, len(doc.Rules))
	for _, r := range doc.Rules {
		re := regexp.MustCompile(r.Pattern)
		if re.NumSubexp() != 3 {
			panic(fmt.Sprintf("redact-rules.json: rule %q has %d groups, want 3", r.Name, re.NumSubexp()))
		}
		out = append(out, rule{hints: r.Hints, re: re, require: r.Require})
	}
	if doc.PEMMaxLines <= 0 {
		panic("redact-rules.json: pemMaxLines must be positive")
	}
	return out, doc.PEMMaxLines
}

// hasClasses reports whether s has a character of each class named.
func hasClasses(s string, classes []string) bool {
	for _, c := range classes {
		var is func(rune) bool
		switch c {
		case "upper":
			is = unicode.IsUpper
		case "lower":
			is = unicode.IsLower
		case "digit":
			is = unicode.IsDigit
		default:
			return false
		}
		if !strings.ContainsFunc(s, is) {
			return false
		}
	}
	return true
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
	inPEM    bool
	pemLines int
	// Count is how many secrets were hidden so far.
	Count int
}

// Line returns line with its secrets masked.
func (r *Redactor) Line(line string) string {
	if r.inPEM {
		if strings.Contains(line, "-----END ") {
			r.inPEM = false
			return Mask
		}
		// A block with no END (a truncated key) hides only what still
		// looks like its body, and at most pemMaxLines lines.
		r.pemLines++
		if r.pemLines <= pemMaxLines && pemBody(line) {
			return Mask
		}
		r.inPEM = false
	}
	if i := strings.Index(line, "-----BEGIN "); i >= 0 && strings.Contains(line[i:], "PRIVATE KEY") || i >= 0 && strings.Contains(line[i:], "CERTIFICATE") {
		r.Count++
		if !strings.Contains(line[i+11:], "-----END ") {
			r.inPEM, r.pemLines = true, 0
		}
		return line[:i] + Mask
	}
	lower := strings.ToLower(line)
	for _, ru := range rules {
		if !hinted(lower, ru.hints) {
			continue
		}
		re, require := ru.re, ru.require
		line = re.ReplaceAllStringFunc(line, func(m string) string {
			sub := re.FindStringSubmatch(m)
			if sub[2] == Mask || len(require) > 0 && !hasClasses(sub[2], require) {
				return m
			}
			r.Count++
			return sub[1] + Mask + sub[3]
		})
	}
	return line
}

// pemBody reports whether line may be part of a PEM block's body: base64
// (no spaces, whatever prefix a rank tag adds) or an encrypted key's
// Proc-Type and DEK-Info headers.
func pemBody(line string) bool {
	t := strings.TrimSpace(line)
	return !strings.ContainsAny(t, " \t") || strings.Contains(t, "Proc-Type:") || strings.Contains(t, "DEK-Info:")
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

// hexRun is a run of 32 or more hex digits.
var hexRun = regexp.MustCompile(`[0-9a-fA-F]{32,}`)

// Quoted masks what String masks and, further, every bare run of 32 or
// more hex digits that mixes letters and digits (an API key such as
// Weights & Biases', a session token): the manager quotes a program's
// output in a job's status and rank failure, which everyone who may see
// the job reads, and such a run cannot be told from a commit hash there.
// Logs keep those (String): a reader of a job's logs may read its secrets
// anyway, and commit hashes in them matter.
func Quoted(s string) (string, int) {
	out, n := String(s)
	var b strings.Builder
	last := 0
	for _, m := range hexRun.FindAllStringIndex(out, -1) {
		run := out[m[0]:m[1]]
		alone := (m[0] == 0 || !isWordByte(out[m[0]-1])) && (m[1] == len(out) || !isWordByte(out[m[1]]))
		if !alone || !strings.ContainsAny(run, "0123456789") || !strings.ContainsAny(run, "abcdefABCDEF") {
			continue
		}
		b.WriteString(out[last:m[0]])
		b.WriteString(Mask)
		last = m[1]
		n++
	}
	if last == 0 {
		return out, n
	}
	b.WriteString(out[last:])
	return b.String(), n
}

func isWordByte(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_'
}
