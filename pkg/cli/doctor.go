package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/mpijob/mpijob/pkg/doctor"
)

// Finding is one check of `kubectl mpijob doctor` (pkg/doctor).
type Finding = doctor.Finding

// Severities of a doctor's finding, in rising order.
const (
	SeverityOK      = doctor.SeverityOK
	SeverityInfo    = doctor.SeverityInfo
	SeverityWarning = doctor.SeverityWarning
	SeverityError   = doctor.SeverityError
)

// doctorOptions is `kubectl mpijob doctor`.
type doctorOptions struct {
	*Options
	output string
	now    func() time.Time
}

func newDoctorCommand(o *Options) *cobra.Command {
	d := &doctorOptions{Options: o, now: time.Now}
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Check the cluster mpijob runs on: versions, CRDs, webhooks, the manager, the log store, runtime images, certificates",
		Long: "Check what mpijob depends on, as you: the versions of Kubernetes, Trainer, JobSet and Kueue and whether Trainer and Kueue work together, " +
			"the CRDs and their stored versions, mpijob's admission (a server dry run of a small job, with its latency), the manager's leader, " +
			"the log store, every runtime's images on the nodes, and certificates that expire within 30 days. Each finding has a fix. " +
			"A check you may not make (a tenant cannot read CRDs or nodes) says so and is skipped.\n\n" +
			"Exit code: 0 when all is well, 1 with warnings, 2 with problems.",
		Example: "  kubectl mpijob doctor\n  kubectl mpijob doctor -o json",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if d.output != "" && d.output != "json" {
				return usageErr("--output %q: use json, or leave it out for a table", d.output)
			}
			return d.Run(cmd.Context())
		},
	}
	cmd.Flags().StringVarP(&d.output, "output", "o", "", "json: the findings as a JSON list")
	return cmd
}

// Run makes every check (pkg/doctor), prints the findings and exits by
// the worst.
func (d *doctorOptions) Run(ctx context.Context) error {
	cl, err := d.clients()
	if err != nil {
		return err
	}
	fs := doctor.Run(ctx, doctor.Env{Client: cl, Discovery: cl.cs.Discovery(), Namespace: cl.namespace, Now: d.now})
	if d.output == "json" {
		enc := json.NewEncoder(d.Out)
		enc.SetIndent("", "  ")
		if err := enc.Encode(fs); err != nil {
			return err
		}
	} else {
		w := tabwriter.NewWriter(d.Out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "CHECK\tSTATUS\tFINDING")
		for _, f := range fs {
			fmt.Fprintf(w, "%s\t%s\t%s\n", f.Check, f.Severity, f.Message)
			if f.Fix != "" {
				fmt.Fprintf(w, "\t\tfix: %s\n", f.Fix)
			}
		}
		if err := w.Flush(); err != nil {
			return err
		}
	}
	switch doctor.Worst(fs) {
	case SeverityError:
		return &exitError{code: 2, msg: "doctor: problems found (above)"}
	case SeverityWarning:
		return &exitError{code: 1, msg: "doctor: warnings (above)"}
	}
	return nil
}
