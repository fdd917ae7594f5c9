package logs

import (
	"encoding/json"
	"os"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

type rankVectors struct {
	Lines []struct {
		Name    string `json:"name"`
		Text    string `json:"text"`
		Rank    *int   `json:"rank"`
		Stream  string `json:"stream"`
		Message string `json:"message"`
	} `json:"lines"`
	Selections []struct {
		Spec  string `json:"spec"`
		Ranks []int  `json:"ranks"`
		Error string `json:"error"`
	} `json:"selections"`
}

func loadRankVectors(t *testing.T) rankVectors {
	t.Helper()
	b, err := os.ReadFile("testdata/rank-vectors.json")
	if err != nil {
		t.Fatal(err)
	}
	var v rankVectors
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

func TestSplitRank(t *testing.T) {
	for _, tc := range loadRankVectors(t).Lines {
		t.Run(tc.Name, func(t *testing.T) {
			got, ok := SplitRank(tc.Text)
			if tc.Rank == nil {
				if ok {
					t.Fatalf("SplitRank(%q) = %+v, want no rank", tc.Text, got)
				}
				return
			}
			want := Tagged{Rank: *tc.Rank, Stream: tc.Stream, Message: tc.Message}
			if diff := cmp.Diff(want, got); diff != "" || !ok {
				t.Errorf("SplitRank(%q) ok=%v (-want +got):\n%s", tc.Text, ok, diff)
			}
		})
	}
}

func TestParseSelection(t *testing.T) {
	for _, tc := range loadRankVectors(t).Selections {
		t.Run(tc.Spec, func(t *testing.T) {
			got, err := ParseSelection(tc.Spec)
			if tc.Error != "" {
				if err == nil || err.Error() != tc.Error {
					t.Fatalf("error %v, want %q", err, tc.Error)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.Ranks, got.Ranks()); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestShown(t *testing.T) {
	for in, want := range map[string]string{
		"epoch 1 loss 0.5":                      "epoch 1 loss 0.5",
		" 10%|#    |\r 50%|##   |\r100%|#####|": "100%|#####|",
		"a line that ends with CRLF\r":          "a line that ends with CRLF",
		"rm -rf /important\rls -l            ":  "ls -l            ",
		"\r":                                    "",
	} {
		if got := Shown(in); got != want {
			t.Errorf("Shown(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestRanksText(t *testing.T) {
	cases := map[string]struct {
		ranks []int
		want  string
	}{
		"none":    {nil, ""},
		"one":     {[]int{7}, "7"},
		"a range": {[]int{0, 1, 2, 3}, "0-3"},
		"mixed":   {[]int{0, 2, 5, 6, 7}, "0,2,5-7"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			got := RanksText(c.ranks)
			if got != c.want {
				t.Errorf("RanksText(%v) = %q, want %q", c.ranks, got, c.want)
			}
			if got != "" {
				sel, err := ParseSelection(got)
				if err != nil || !slices.Equal(sel.Ranks(), c.ranks) {
					t.Errorf("ParseSelection(%q) = %v, %v: not the ranks written", got, sel.Ranks(), err)
				}
			}
		})
	}
}
