package logs

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestString(t *testing.T) {
	cases := map[string]struct {
		in, want string
		count    int
	}{
		"plain log line kept": {in: "mpi-hello: rank 3 of 4 on node-1", want: "mpi-hello: rank 3 of 4 on node-1"},
		"password setting":    {in: "connecting with password=hunter2 to db", want: "connecting with password=" + Mask + " to db", count: 1},
		"quoted json secret":  {in: `{"api_key": "abc123def", "user": "x"}`, want: `{"api_key": "` + Mask + `", "user": "x"}`, count: 1},
		"env style token":     {in: "HF_TOKEN=hf_abcdefghijklmnopqrstuvwxyz0123456789", want: "HF_TOKEN=" + Mask, count: 1},
		"bearer header":       {in: "Authorization: Bearer abcdefghijklmnop", want: "Authorization: Bearer " + Mask, count: 1},
		"aws key id":          {in: "using AKIAABCDEFGHIJKLMNOP for s3", want: "using " + Mask + " for s3", count: 1},
		"url credentials":     {in: "git clone https://bob:s3cr3t@example.com/repo", want: "git clone https://bob:" + Mask + "@example.com/repo", count: 1},
		"pem block": {
			in:    "key follows\n-----BEGIN RSA PRIVATE KEY-----\nMIIEabc\nxyz\n-----END RSA PRIVATE KEY-----\ndone",
			want:  "key follows\n" + Mask + "\n" + Mask + "\n" + Mask + "\n" + Mask + "\ndone",
			count: 1,
		},
		"words that only look alike": {in: "tokenizer loaded 50257 tokens", want: "tokenizer loaded 50257 tokens"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, n := String(tc.in)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("String (-want,+got):\n%s", diff)
			}
			if n != tc.count {
				t.Errorf("count = %d, want %d", n, tc.count)
			}
		})
	}
}
