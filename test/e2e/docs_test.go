//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/shlex"
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mpijob/mpijob/test/framework"
)

// docCommand is one command of a docs' shell block.
type docCommand struct {
	where string // file:line
	args  []string
	// wantErr are the fragments of a "# error: ..." comment under it: the
	// command is documented to fail, saying them.
	wantErr []string
}

// placeholders mark commands whose names stand for the reader's own
// (an image, a bucket, a ConfigMap, a program): checked on the client only.
var placeholders = []string{"registry.example.com", "my-bucket", "train-config", "train.py"}

// docCommands reads the commands of the ```sh blocks of a Markdown file:
// continued lines joined, "$ " prompts (then the other lines are output),
// comments and everything after a pipe dropped, && chains split.
func docCommands(t *testing.T, path string) []docCommand {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	var lines []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	var out []docCommand
	for i := 0; i < len(lines); i++ {
		if strings.TrimSpace(lines[i]) != "```sh" {
			continue
		}
		start := i + 1
		end := start
		for end < len(lines) && strings.TrimSpace(lines[end]) != "```" {
			end++
		}
		block := lines[start:end]
		prompted := slices.ContainsFunc(block, func(l string) bool { return strings.HasPrefix(l, "$ ") })
		for j := 0; j < len(block); j++ {
			l := block[j]
			where := filepath.Base(path) + ":" + strconv.Itoa(start+j+1)
			if strings.HasPrefix(strings.TrimSpace(l), "# error:") && len(out) > 0 {
				for _, frag := range strings.Split(strings.TrimPrefix(strings.TrimSpace(l), "# error:"), "...") {
					if frag = strings.TrimSpace(frag); frag != "" {
						out[len(out)-1].wantErr = append(out[len(out)-1].wantErr, frag)
					}
				}
				continue
			}
			if prompted {
				if !strings.HasPrefix(l, "$ ") {
					continue
				}
				l = strings.TrimPrefix(l, "$ ")
			}
			for strings.HasSuffix(strings.TrimSpace(l), `\`) && j+1 < len(block) {
				j++
				l = strings.TrimSuffix(strings.TrimSpace(l), `\`) + " " + strings.TrimSpace(block[j])
			}
			words, err := shlex.Split(l)
			if err != nil {
				t.Errorf("%s: %q does not split as a shell would: %v", where, l, err)
				continue
			}
			if i := slices.Index(words, "|"); i >= 0 {
				words = words[:i]
			}
			for len(words) > 0 {
				cmd := words
				rest := []string(nil)
				if k := slices.Index(words, "&&"); k >= 0 {
					cmd, rest = words[:k], words[k+1:]
				}
				if len(cmd) > 0 {
					out = append(out, docCommand{where: where, args: cmd})
				}
				words = rest
			}
		}
		i = end
	}
	return out
}

var makeTarget = regexp.MustCompile(`(?m)^([A-Za-z0-9_.-]+):`)

// The commands of README.md, docs/quickstart.md and docs/training.md run
// as written, as a new user would type them (dev-a in team-a): every
// `kubectl mpijob create` passes a server dry run (admission, quota and
// placement; a client one where a name stands for the reader's own), one
// documented to fail fails with the documented words, every other verb
// and its flags parse, every make target exists, and a job that writes
// its output "from-env" attaches where it goes.
func TestDocsCommandsRunAsWritten(t *testing.T) {
	t.Parallel()
	framework.Get(t)
	mk, err := os.ReadFile("../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	targets := map[string]bool{}
	for _, m := range makeTarget.FindAllStringSubmatch(string(mk), -1) {
		targets[m[1]] = true
	}
	checked := 0
	for _, doc := range []string{"../../README.md", "../../docs/quickstart.md", "../../docs/training.md"} {
		for _, c := range docCommands(t, doc) {
			a := c.args
			switch {
			case a[0] == "make":
				for _, target := range a[1:] {
					if !strings.Contains(target, "=") && !targets[target] {
						t.Errorf("%s: make %s: the Makefile has no target %q", c.where, strings.Join(a[1:], " "), target)
					}
				}
				checked++
			case len(a) > 1 && a[0] == "kubectl" && a[1] == "mpijob":
				checkDocMPIJob(t, c)
				checked++
			default:
				t.Logf("%s: not run here: %s", c.where, strings.Join(a, " "))
			}
		}
	}
	if checked < 20 {
		t.Errorf("checked only %d commands of the docs: the parser lost some", checked)
	}
}

func checkDocMPIJob(t *testing.T, c docCommand) {
	t.Helper()
	args := slices.Clone(c.args[2:])
	dash := slices.Index(args, "--")
	own, program := args, []string(nil)
	if dash >= 0 {
		own, program = args[:dash], args[dash:]
	}
	line := strings.Join(c.args, " ")
	if args[0] != "create" {
		// Flags parse and the verb exists: --help runs nothing.
		r := runCLI(t, "dev-a", "team-a", append(slices.Clone(own), "--help")...)
		if r.code != 0 {
			t.Errorf("%s: %s: exit %d: %s", c.where, line, r.code, r.errOut)
		}
		return
	}
	if slices.Contains(program, "--output") && slices.Contains(program, "from-env") &&
		!slices.Contains(own, "--data-connection") && !slices.Contains(own, "--pvc") {
		t.Errorf("%s: %s: --output from-env writes to the job's data connection or PVC, and the command attaches none", c.where, line)
	}
	// A person types the next command seconds after the last: a per-job
	// runtime an earlier dry run of the same name made (and deleted) is
	// gone by then. (One that goes while the next create looks at it is
	// no error either: jobspec's TestCreateRuntimeWhileTheOldOneGoes.)
	if len(own) > 1 {
		waitFor(t, 30*time.Second, own[1]+"'s earlier runtime gone", func() (bool, string) {
			err := framework.Get(t).Client.Get(context.Background(), client.ObjectKey{Namespace: "team-a", Name: own[1]}, &trainer.TrainingRuntime{})
			return apierrors.IsNotFound(err), fmt.Sprint(err)
		})
	}
	dry := "--dry-run=server"
	if slices.ContainsFunc(placeholders, func(p string) bool { return strings.Contains(line, p) }) {
		dry = "--dry-run=client"
	}
	full := append(append(slices.Clone(own), dry), program...)
	r := runCLI(t, "dev-a", "team-a", full...)
	switch {
	case len(c.wantErr) > 0:
		if r.code == 0 {
			t.Errorf("%s: %s: documented to fail, but passed %s", c.where, line, dry)
		}
		for _, frag := range c.wantErr {
			if !strings.Contains(r.out+r.errOut, frag) {
				t.Errorf("%s: %s: the documented error says %q; the CLI said: %s", c.where, line, frag, r.errOut)
			}
		}
	case r.code != 0:
		t.Errorf("%s: %s (%s): exit %d: %s%s", c.where, line, dry, r.code, r.out, r.errOut)
	}
}
