package api

import (
	"testing"
)

func TestResumedAndAttemptsText(t *testing.T) {
	cases := map[string]struct {
		got, want string
	}{
		"epoch of total, age":   {Resumed{Epoch: 12, TotalEpochs: 30, AgeSeconds: 240}.Text(), "resumed from epoch 12 of 30 (checkpoint written 4 minutes earlier)"},
		"within an epoch":       {Resumed{Epoch: 3, Step: 6, AgeSeconds: 1}.Text(), "resumed from epoch 3, step 6 of the next (checkpoint written 1 second earlier)"},
		"another job's":         {Resumed{Epoch: 7, TotalEpochs: 9, From: "s3://b/a/checkpoints/ckpt-000007-000000000/"}.Text(), "resumed from epoch 7 of 9 (another job's checkpoint, s3://b/a/checkpoints/ckpt-000007-000000000/)"},
		"retry of":              {Attempts{Retries: 2, MaxRetries: 3}.Text(), "retry 2 of 3"},
		"retry and preemptions": {Attempts{Retries: 1, MaxRetries: 3, Preemptions: 1}.Text(), "retry 1 of 3, preempted once"},
		"preempted twice":       {Attempts{Preemptions: 2}.Text(), "preempted 2 times"},
		"first attempt":         {Attempts{}.Text(), ""},
	}
	for name, tc := range cases {
		if tc.got != tc.want {
			t.Errorf("%s: %q, want %q", name, tc.got, tc.want)
		}
	}
}
