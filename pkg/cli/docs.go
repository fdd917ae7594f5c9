package cli

import (
	"bytes"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"
)

func newDocsCommand(o *Options) *cobra.Command {
	var out string
	cmd := &cobra.Command{
		Use:    "docs",
		Short:  "Write the command reference (docs/cli.md) from the commands themselves",
		Hidden: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			b, err := Reference(cmd.Root())
			if err != nil {
				return err
			}
			if out == "-" {
				_, err = o.Out.Write(b)
				return err
			}
			return os.WriteFile(out, b, 0o644)
		},
	}
	cmd.Flags().StringVar(&out, "output", "docs/cli.md", "file to write (- for stdout)")
	return cmd
}

// Reference renders every command's help as one Markdown page.
func Reference(root *cobra.Command) ([]byte, error) {
	// The completion command is added on first run; add it now so the
	// reference is the same however it is made.
	root.InitDefaultCompletionCmd()
	// Defaults that depend on the machine read the same everywhere.
	if f := root.PersistentFlags().Lookup("cache-dir"); f != nil {
		f.DefValue = "$HOME/.kube/cache"
	}
	var b bytes.Buffer
	b.WriteString("# kubectl-mpijob reference\n\n")
	b.WriteString("Generated from the commands by `kubectl-mpijob docs` (`make docs`); do not edit by hand.\n\n")
	b.WriteString(exitCodes)
	b.WriteString("Every command also takes the global options listed under kubectl-mpijob (kubeconfig, context, namespace, impersonation).\n\n")
	var walk func(c *cobra.Command) error
	walk = func(c *cobra.Command) error {
		if c.Hidden || c.Name() == "help" || strings.HasPrefix(c.CommandPath(), root.DisplayName()+" completion ") {
			return nil
		}
		c.DisableAutoGenTag = true
		var one bytes.Buffer
		if err := doc.GenMarkdown(c, &one); err != nil {
			return err
		}
		// One page: demote headings and drop per-page "SEE ALSO" links.
		text := one.String()
		if i := strings.Index(text, "### SEE ALSO"); i >= 0 {
			text = text[:i]
		}
		// The global options are listed once, under kubectl-mpijob.
		if i := strings.Index(text, "### Options inherited from parent commands"); i >= 0 {
			text = text[:i]
		}
		text = strings.ReplaceAll(text, "\n## ", "\n### ")
		text = strings.Replace(text, "## "+c.CommandPath(), "## "+c.CommandPath(), 1)
		fmt.Fprintln(&b, strings.TrimSpace(text))
		b.WriteString("\n\n")
		for _, sub := range c.Commands() {
			if err := walk(sub); err != nil {
				return err
			}
		}
		return nil
	}
	if err := walk(root); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

const exitCodes = `## Exit codes

| code | meaning |
| --- | --- |
| 0 | success (wait: the job reached the phase) |
| 1 | any other error (cluster unreachable, API error) |
| 2 | bad input: a flag, a name, a file (the message names it and the fix) |
| 3 | not found: the job, runtime or pod (with "did you mean" when close) |
| 4 | permission denied by RBAC (the message names user, verb and namespace) |
| 5 | refused by admission: quota, runtime policy, validation (the webhook's words) |
| 6 | wait / runtimes test: the job finished in another phase (diagnosis printed) |
| 7 | timeout |

` + "`doctor`" + ` has its own: 0 all is well, 1 warnings, 2 problems.

`
