package cli

import (
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/util/duration"

	"github.com/mpijob/mpijob/pkg/artifacts"
)

// artifactsOptions is `kubectl mpijob artifacts`.
type artifactsOptions struct {
	*Options
	name      string
	download  string
	overwrite bool
	only      []string
	now       func() time.Time
	// open finds a job's store (artifacts.Open; a fake in unit tests).
	open func(ctx context.Context, cl *clients, name string, progress io.Writer) (artifacts.Source, error)
}

func newArtifactsCommand(o *Options) *cobra.Command {
	a := &artifactsOptions{Options: o, now: time.Now, open: openStore}
	cmd := &cobra.Command{
		Use:   "artifacts NAME",
		Short: "List or download what an MPI job wrote to its data connection (s3://BUCKET/NAME/) or PVC",
		Long: "List the artifacts an MPI job wrote to its $MPIJOB_OUTPUT_URI: under s3://BUCKET/NAME/ on its first data connection, " +
			"reading the connection's Secret as you (who cannot read the Secret cannot read the artifacts), or else under " +
			"/mnt/CLAIM/NAME/ on its first PVC, through a short-lived pod that you start and that mounts the claim read-only " +
			"(it needs the right to create pods and pods/exec, and is deleted when done). " +
			"With --download DIR, download them (or the ones named with --file) into DIR.",
		Example:           "  kubectl mpijob artifacts digits\n  kubectl mpijob artifacts digits --download ./digits-model\n  kubectl mpijob artifacts digits --download . --file metrics.json",
		Args:              exactlyOneName("artifacts"),
		ValidArgsFunction: o.completeJobs,
		RunE: func(cmd *cobra.Command, args []string) error {
			a.name = args[0]
			if len(a.only) > 0 && a.download == "" {
				return usageErr("--file %s: give --download DIR too, e.g. --download . --file %s", a.only[0], a.only[0])
			}
			return a.Run(cmd.Context())
		},
	}
	cmd.Flags().StringVar(&a.download, "download", "", "download the artifacts into this folder (made if missing)")
	cmd.Flags().StringArrayVar(&a.only, "file", nil, "with --download, only this artifact (repeatable)")
	cmd.Flags().BoolVar(&a.overwrite, "overwrite", false, "with --download, replace files that already exist in the folder (without it, nothing is downloaded when one would be replaced)")
	return cmd
}

func openStore(ctx context.Context, cl *clients, name string, progress io.Writer) (artifacts.Source, error) {
	tj, err := cl.job(ctx, name)
	if err != nil {
		return nil, err
	}
	s, err := artifacts.Open(ctx, cl, cl.cfg, tj)
	if artifacts.IsNoStorage(err) {
		return nil, usageErr("%s", err.Error())
	}
	if err != nil {
		return nil, err
	}
	if p, ok := s.(*artifacts.PVCStore); ok {
		p.Progress = progress
	}
	return s, nil
}

// Run lists the artifacts, or downloads them.
func (a *artifactsOptions) Run(ctx context.Context) error {
	cl, err := a.clients()
	if err != nil {
		return err
	}
	s, err := a.open(ctx, cl, a.name, a.ErrOut)
	if err != nil {
		return err
	}
	defer func() {
		if err := s.Close(); err != nil {
			fmt.Fprintf(a.ErrOut, "Warning: %v\n", err)
		}
	}()
	objs, err := s.List(ctx)
	if err != nil {
		return err
	}
	where := s.Location().URI
	if len(objs) == 0 {
		fmt.Fprintf(a.ErrOut, "No artifacts in %s yet: the job writes them to $MPIJOB_OUTPUT_URI (e.g. --output from-env in the examples).\n", where)
		return nil
	}
	if a.download == "" {
		w := tabwriter.NewWriter(a.Out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "NAME\tSIZE\tAGE")
		for _, o := range objs {
			name := o.Name
			if artifacts.NameProblem(name) != "" {
				// A newline or U+202E in a name must not fake a row.
				name = strconv.Quote(name)
			}
			fmt.Fprintf(w, "%s\t%s\t%s\n", name, humanBytes(o.Size), duration.HumanDuration(a.now().Sub(o.LastModified)))
		}
		return w.Flush()
	}
	want := map[string]bool{}
	for _, f := range a.only {
		want[f] = true
	}
	var picked []artifacts.Object
	for _, o := range objs {
		if len(a.only) == 0 || want[o.Name] {
			picked = append(picked, o)
			delete(want, o.Name)
		}
	}
	if len(want) > 0 {
		missing := slices.Sorted(maps.Keys(want))
		return usageErr("--file %s: %s has no such artifact; it has %s", missing[0], where, names(objs))
	}
	// Nothing already in the folder is replaced unless asked: a job
	// chooses its artifacts' names, and the folder is the user's.
	if !a.overwrite {
		var there []string
		for _, o := range picked {
			if artifacts.NameProblem(o.Name) != "" {
				continue
			}
			dst := filepath.Join(a.download, filepath.FromSlash(o.Name))
			if _, err := os.Lstat(dst); err == nil {
				there = append(there, dst)
			}
		}
		if len(there) > 0 {
			more := ""
			if len(there) > 1 {
				more = fmt.Sprintf(" (and %d more)", len(there)-1)
			}
			return usageErr("--download %s: %s already exists%s: nothing was downloaded; give --overwrite to replace, or download into another folder", a.download, there[0], more)
		}
	}
	for i, o := range picked {
		if why := artifacts.NameProblem(o.Name); why != "" {
			// The job chose the name: it is never written outside the
			// folder, and the other files are still downloaded.
			fmt.Fprintf(a.ErrOut, "[%d/%d] skipped %q: the name %s, so it cannot be written under %s\n", i+1, len(picked), o.Name, why, a.download)
			continue
		}
		dst := filepath.Join(a.download, filepath.FromSlash(o.Name))
		if err := a.fetch(ctx, s, o.Name, dst); err != nil {
			return err
		}
		fmt.Fprintf(a.Out, "[%d/%d] %s (%s) -> %s\n", i+1, len(picked), o.Name, humanBytes(o.Size), dst)
	}
	return nil
}

// fetch writes one artifact to dst through a temporary file, so an
// interrupted download leaves no half file under the artifact's name.
func (a *artifactsOptions) fetch(ctx context.Context, s artifacts.Source, name, dst string) error {
	r, _, err := s.Open(ctx, name)
	if err != nil {
		return err
	}
	defer func() { _ = r.Close() }()
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(dst), ".download-*")
	if err != nil {
		return err
	}
	if _, err := io.Copy(tmp, r); err != nil {
		_ = tmp.Close()
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("failed to download %s: %w", name, err)
	}
	if err := tmp.Close(); err != nil {
		_ = os.Remove(tmp.Name())
		return err
	}
	return os.Rename(tmp.Name(), dst)
}

func names(objs []artifacts.Object) string {
	out := ""
	for i, o := range objs {
		if i > 0 {
			out += ", "
		}
		out += o.Name
	}
	return out
}

func humanBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
