// Command mpijob-dev starts and stops the real local cluster that `make dev`
// and the tests use. See docs/development.md.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/mpijob/mpijob/pkg/localcluster"
	"github.com/mpijob/mpijob/pkg/localcluster/images"
)

func main() {
	// controller-runtime's client (the manifests' apply) logs through
	// its own logger: errors only, to stderr. Unset, it printed a
	// goroutine's stack in the middle of `make dev` ("log.SetLogger(...)
	// was never called").
	ctrllog.SetLogger(logr.FromSlogHandler(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError})))
	if err := newRootCmd().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "mpijob-dev",
		Short:         "Run the real local Kubernetes cluster for mpijob development and tests",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newUpCmd(), newDownCmd(), newStatusCmd(), newBuildCmd(), newReloadCmd(), newImagesCmd(), newImageBuilderCmd(), newLogCollectorCmd(), newRegistryGatewayCmd())
	return root
}

func options() (localcluster.Options, error) {
	wd, err := os.Getwd()
	if err != nil {
		return localcluster.Options{}, err
	}
	return localcluster.DefaultOptions(wd)
}

func newUpCmd() *cobra.Command {
	var detach, skipImages, prebuild bool
	var kwokNodes int
	var sample string
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Build what is missing, start the cluster and stay up until Ctrl-C (or return with --detach)",
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts, err := options()
			if err != nil {
				return err
			}
			if os.Geteuid() != 0 {
				return localcluster.ErrNotRoot
			}
			opts.SkipImages = skipImages
			opts.PrebuildImages = prebuild && !skipImages
			opts.KwokNodes = kwokNodes
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			// Ctrl-C on `make dev | tee log` ends tee first; teardown must
			// still run when our output has nowhere to go.
			signal.Ignore(syscall.SIGPIPE)
			out := cmd.OutOrStdout()
			c := localcluster.New(opts, out)
			start := time.Now()
			if err := c.Up(ctx); err != nil {
				fmt.Fprintln(out, "the cluster did not come up; stopping what started (logs stay in", opts.StateDir+"/logs)")
				_ = localcluster.Down(context.Background(), opts, out)
				return err
			}
			fmt.Fprintf(out, "\nthe cluster runs jobs after %s (KUBECONFIG=%s); %s follow\n", time.Since(start).Round(100*time.Millisecond), opts.KubeconfigPath(), strings.Join(c.Following(), ", "))
			if sample != "" {
				if err := c.SubmitSample(ctx, sample); err != nil {
					return err
				}
			}
			if err := c.Finish(ctx); err != nil {
				fmt.Fprintln(out, "the cluster did not come up; stopping what started (logs stay in", opts.StateDir+"/logs)")
				_ = localcluster.Down(context.Background(), opts, out)
				return err
			}
			fmt.Fprintf(out, "\nlocal cluster up in %s\n", time.Since(start).Round(100*time.Millisecond))
			fmt.Fprint(out, c.Summary())
			if detach {
				return nil
			}
			fmt.Fprintln(out, "\nPress Ctrl-C to stop the cluster.")
			<-ctx.Done()
			if !localcluster.OwnedBy(opts, os.Getpid()) {
				fmt.Fprintln(out, "\na later `mpijob-dev up` replaced this cluster; leaving it running")
				return nil
			}
			fmt.Fprintln(out, "\nstopping the local cluster ...")
			return localcluster.Down(context.Background(), opts, out)
		},
	}
	cmd.Flags().BoolVar(&detach, "detach", false, "return once the cluster is ready and leave it running (stop it with `mpijob-dev down`)")
	cmd.Flags().BoolVar(&skipImages, "skip-images", false, "do not build or import the MPI images")
	cmd.Flags().BoolVar(&prebuild, "prebuild-images", false, "once the cluster is up, build every runtime's image that is not built yet, in the background (the image builder), so each runtime's first test passes")
	cmd.Flags().IntVar(&kwokNodes, "kwok-nodes", 16, "number of fake GPU nodes (8 nvidia.com/gpu each)")
	cmd.Flags().StringVar(&sample, "sample", "", "a TrainJob manifest to submit once the cluster is up (make dev uses config/samples/mpi-hello.yaml)")
	return cmd
}

func newDownCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "down",
		Short: "Stop the cluster and remove its processes, mounts, links, cgroups and /etc/hosts lines",
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts, err := options()
			if err != nil {
				return err
			}
			return localcluster.Down(context.Background(), opts, cmd.OutOrStdout())
		},
	}
}

func newReloadCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "reload",
		Short: "Rebuild mpijob-manager and the dashboard from this checkout, re-apply the runtimes and roles, and restart both in the running cluster, the image builder with this checkout's recipes and the log collector",
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts, err := options()
			if err != nil {
				return err
			}
			ctx := context.Background()
			if err := localcluster.Reload(ctx, opts, cmd.OutOrStdout()); err != nil {
				return err
			}
			return localcluster.RestartImageBuilder(ctx, opts, cmd.OutOrStdout())
		},
	}
}

func newStatusCmd() *cobra.Command {
	var memory bool
	var wait time.Duration
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Say whether the local cluster runs; exit 1 when it does not",
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts, err := options()
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if wait > 0 {
				if err := localcluster.WaitFinished(cmd.Context(), opts, out, wait); err != nil {
					return err
				}
			}
			ok, msg := localcluster.Status(context.Background(), opts)
			if !ok {
				return errors.New(msg)
			}
			fmt.Fprintln(out, msg)
			if memory {
				rows, total := localcluster.Memory(opts)
				fmt.Fprintf(out, "\n%-36s %10s\n", "PART", "RSS (MiB)")
				for _, r := range rows {
					fmt.Fprintf(out, "%-36s %10.1f\n", r.Name, float64(r.Bytes)/(1<<20))
				}
				fmt.Fprintf(out, "%-36s %10.1f\n", "TOTAL", float64(total)/(1<<20))
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&memory, "memory", false, "also print the resident memory of every cluster process and node")
	cmd.Flags().DurationVar(&wait, "wait", 0, "first wait up to this long for a starting cluster's log, object and metrics stores (`make dev` starts them after the first job can run)")
	return cmd
}

func newBuildCmd() *cobra.Command {
	var skipImages bool
	cmd := &cobra.Command{
		Use:   "build",
		Short: "Build the pinned toolchain and the MPI images into the cache without starting anything",
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts, err := options()
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			p := localcluster.NewProgress(cmd.OutOrStdout())
			if err := localcluster.BuildToolchain(ctx, opts, p); err != nil {
				return err
			}
			if skipImages {
				return nil
			}
			return localcluster.BuildImages(ctx, opts, p)
		},
	}
	cmd.Flags().BoolVar(&skipImages, "skip-images", false, "build only the toolchain")
	return cmd
}

func newImagesCmd() *cobra.Command {
	var all bool
	var push, overlay string
	cmd := &cobra.Command{
		Use:   "images [NAME...]",
		Short: "Build MPI images (and import them into the running local cluster), or push them to your registry",
		Long: `Build the named MPI images, or every one with --all, cached by their inputs.
When the local cluster runs, each is imported into its nodes, so jobs on the
runtime that uses it start; the CUDA image (openmpi-cuda, for GPU Workers)
is only built, since no node here has a GPU. make dev builds only openmpi and mpich; the other
flavours are built here, once.

With --push REGISTRY every image (and mpijob-manager's and mpijob-dashboard's)
goes to your registry as REGISTRY/NAME:TAG, and --overlay DIR writes a
kustomization over config/default that installs from there, pinned by digest.`,
		Example: `  mpijob-dev images openmpi5 intel
  mpijob-dev images --all
  mpijob-dev images --all --push quay.io/my-team --overlay config/registry`,
		ValidArgs: localcluster.ImageNames(),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts, err := options()
			if err != nil {
				return err
			}
			if os.Geteuid() != 0 {
				return localcluster.ErrNotRoot
			}
			imgs, err := localcluster.SelectImages(args, all)
			if err != nil {
				return err
			}
			if overlay != "" && push == "" {
				return errors.New("--overlay needs --push REGISTRY: the overlay points at the pushed images")
			}
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			out := cmd.OutOrStdout()
			if push == "" {
				return ensureImages(ctx, opts, out, imgs, all)
			}
			if err := localcluster.ValidRegistry(push); err != nil {
				return err
			}
			pushed, err := localcluster.PushImages(ctx, opts, out, imgs, push, all)
			if err != nil {
				return err
			}
			for _, p := range pushed {
				fmt.Fprintf(out, "%-44s -> %s\n", p.Ref, p.To)
			}
			if overlay == "" {
				return nil
			}
			abs, err := filepath.Abs(overlay)
			if err != nil {
				return err
			}
			base, err := filepath.Rel(abs, filepath.Join(opts.RepoRoot, "config", "default"))
			if err != nil {
				return err
			}
			b, err := localcluster.RegistryOverlay(base, pushed)
			if err != nil {
				return err
			}
			if err := os.MkdirAll(abs, 0o755); err != nil {
				return err
			}
			if err := os.WriteFile(filepath.Join(abs, "kustomization.yaml"), b, 0o644); err != nil {
				return err
			}
			fmt.Fprintf(out, "\nwrote %s; install mpijob from your registry with\n  kubectl apply --server-side -k %s\n", filepath.Join(overlay, "kustomization.yaml"), overlay)
			return nil
		},
	}
	cmd.Flags().BoolVar(&all, "all", false, "every MPI image")
	cmd.Flags().StringVar(&push, "push", "", "push to this registry and path, e.g. quay.io/my-team (credentials from docker or podman login)")
	cmd.Flags().StringVar(&overlay, "overlay", "", "with --push: write a kustomization over config/default that installs from the registry into this folder")
	return cmd
}

// ensureImages builds imgs (and imports them into the running local
// cluster). With --all the GPU images come last, and one the disk has no
// room for is skipped with why: the local cluster never runs them, and
// the other images are built.
func ensureImages(ctx context.Context, opts localcluster.Options, out io.Writer, imgs []localcluster.Image, all bool) error {
	const why = "asked for by mpijob-dev images"
	if !all {
		return localcluster.EnsureImages(ctx, opts, out, imgs, why)
	}
	var cpu, gpu []localcluster.Image
	for _, im := range imgs {
		if im.GPU {
			gpu = append(gpu, im)
		} else {
			cpu = append(cpu, im)
		}
	}
	if err := localcluster.EnsureImages(ctx, opts, out, cpu, why); err != nil {
		return err
	}
	for _, im := range gpu {
		err := localcluster.EnsureImages(ctx, opts, out, []localcluster.Image{im}, why)
		var room *images.NoRoomError
		if errors.As(err, &room) {
			fmt.Fprintf(out, "skipped %s (a GPU image, which the local cluster does not run): %v\n", im.Ref, err)
			continue
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// hostProcessCmd is one of the host processes `up` starts beside the
// cluster (hidden: not for people): serve runs until SIGINT or SIGTERM.
func hostProcessCmd(use, short string, serve func(context.Context, localcluster.Options, io.Writer) error) *cobra.Command {
	return &cobra.Command{
		Use:    use,
		Short:  short,
		Hidden: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts, err := options()
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return serve(ctx, opts, cmd.OutOrStdout())
		},
	}
}

// newLogCollectorCmd is the local cluster's log collector and the log
// store's gateway.
func newLogCollectorCmd() *cobra.Command {
	return hostProcessCmd("log-collector", "Read the real nodes' pod logs into the log store and serve the store to mpijob-manager", localcluster.ServeLogs)
}

// newRegistryGatewayCmd is the model registry's gateway: it lets through
// the callers the API server says may use the registry's Service.
func newRegistryGatewayCmd() *cobra.Command {
	return hostProcessCmd(localcluster.RegistryGatewayProcess, "Serve the model registry to callers whose token the API server says may use its Service", localcluster.ServeRegistryGateway)
}

// newImageBuilderCmd is the local cluster's on-demand image builder.
func newImageBuilderCmd() *cobra.Command {
	return hostProcessCmd("image-builder", "Build the MPI images that pods of the running local cluster ask for", localcluster.ServeImages)
}
