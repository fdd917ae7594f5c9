package api

import "testing"

func TestWords(t *testing.T) {
	cases := map[string]struct{ got, want string }{
		"one noun":   {Count(1, "node", "nodes"), "1 node"},
		"many nouns": {Count(3, "node", "nodes"), "3 nodes"},
		"no nouns":   {Count(0, "node", "nodes"), "0 nodes"},
		"one verb":   {Agree(1, "has", "have"), "has"},
		"many verbs": {Agree(2, "has", "have"), "have"},
	}
	for name, tc := range cases {
		if tc.got != tc.want {
			t.Errorf("%s: %q, want %q", name, tc.got, tc.want)
		}
	}
}
