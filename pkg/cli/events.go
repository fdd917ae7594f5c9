package cli

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/duration"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mpijob/mpijob/pkg/api"
)

// eventsOptions is `kubectl mpijob events`.
type eventsOptions struct {
	*Options
	name string
	now  func() time.Time
}

func newEventsCommand(o *Options) *cobra.Command {
	e := &eventsOptions{Options: o, now: time.Now}
	return &cobra.Command{
		Use:   "events NAME",
		Short: "Events of an MPI job, its JobSet, Jobs and pods, oldest first",
		Long: `Events of an MPI job, its JobSet, Jobs and pods, oldest first.

Anyone who may edit the namespace may create Events there. An Event that
claims to come from mpijob-manager but is not one the manager vouches for
(in the job's status) starts with "` + strings.TrimSpace(ForgedMark) + `".`,
		Args:              exactlyOneName("events"),
		ValidArgsFunction: o.completeJobs,
		RunE: func(cmd *cobra.Command, args []string) error {
			e.name = args[0]
			return e.Run(cmd.Context())
		},
	}
}

// Run prints the job's own events (exact names), oldest first.
func (e *eventsOptions) Run(ctx context.Context) error {
	cl, err := e.clients()
	if err != nil {
		return err
	}
	tj, err := cl.job(ctx, e.name)
	if err != nil {
		return err
	}
	evs, err := jobEvents(ctx, cl, tj)
	if err != nil {
		return err
	}
	if len(evs) == 0 {
		fmt.Fprintf(e.ErrOut, "No events for MPI job %s (events expire after an hour).\n", tj.Name)
		return nil
	}
	printEvents(e.Out, evs, tj, e.now())
	return nil
}

// jobEvents are the events of the TrainJob and of its own objects, by
// their exact names (JobSet, Jobs, pods, Workload, NetworkPolicy), oldest
// first.
func jobEvents(ctx context.Context, cl *clients, tj *trainer.TrainJob) ([]corev1.Event, error) {
	l := &corev1.EventList{}
	if err := cl.List(ctx, l, client.InNamespace(tj.Namespace)); err != nil {
		return nil, err
	}
	return api.JobEvents(tj.Name, l.Items), nil
}

// ForgedMark starts the message of an Event that says it comes from
// mpijob-manager but is not one the manager vouches for (api.ForgedEvent):
// someone who may create Events in the namespace wrote it.
const ForgedMark = "[not written by mpijob-manager] "

func printEvents(out io.Writer, evs []corev1.Event, tj *trainer.TrainJob, now time.Time) {
	st, _ := api.StatusOf(tj)
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "  AGE\tTYPE\tREASON\tOBJECT\tMESSAGE")
	for _, e := range evs {
		msg := strings.TrimSpace(e.Message)
		if api.ForgedEvent(e, st) {
			msg = ForgedMark + msg
		}
		fmt.Fprintf(w, "  %s\t%s\t%s\t%s/%s\t%s\n", duration.HumanDuration(now.Sub(api.EventTime(e))), e.Type, e.Reason,
			strings.ToLower(e.InvolvedObject.Kind), e.InvolvedObject.Name, msg)
	}
	_ = w.Flush()
}
