package cli

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/transport/spdy"
)

// portForwardOptions is `kubectl mpijob port-forward`: local ports to a
// job's Launcher (TensorBoard, a debugger) or Worker, as kubectl
// port-forward does (client-go's port forwarder).
type portForwardOptions struct {
	*Options
	target
	name    string
	ports   []string
	address []string
}

func newPortForwardCommand(o *Options) *cobra.Command {
	p := &portForwardOptions{Options: o}
	cmd := &cobra.Command{
		Use:   "port-forward NAME [--launcher | --worker N | --rank N] [LOCAL:]REMOTE...",
		Short: "Forward local ports to a job's Launcher (TensorBoard, a debugger) or one of its Workers",
		Long: `Forward local ports to a running MPI job's pod: the Launcher by default,
Worker N with --worker, or the Worker that hosts a rank with --rank. Each
port is REMOTE (the same port here) or LOCAL:REMOTE; it runs until
interrupted (Ctrl-C) or the pod ends. It takes what kubectl port-forward
takes: the right to create pods/portforward in the job's namespace.`,
		Example: `  kubectl mpijob port-forward hello 6006          # TensorBoard on the Launcher: http://localhost:6006
  kubectl mpijob port-forward hello 8888:6006
  kubectl mpijob port-forward hello --rank 3 5678  # a debugger listening in rank 3`,
		ValidArgsFunction: o.completeJobs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := p.Complete(args); err != nil {
				return err
			}
			if err := p.Validate(); err != nil {
				return err
			}
			return p.Run(cmd.Context())
		},
	}
	p.flags(cmd, "forward to")
	cmd.Flags().StringSliceVar(&p.address, "address", []string{"localhost"}, "local addresses to listen on (comma-separated): localhost, 127.0.0.1, ::1 or an IP")
	return cmd
}

// Complete takes the job's name and ports.
func (p *portForwardOptions) Complete(args []string) error {
	if len(args) > 0 {
		p.name, p.ports = args[0], args[1:]
	}
	return nil
}

// Validate checks the arguments; no API call.
func (p *portForwardOptions) Validate() error {
	if p.name == "" {
		return usageErr("port-forward takes a job NAME and ports: kubectl mpijob port-forward NAME 6006")
	}
	if len(p.ports) == 0 {
		return usageErr("port-forward needs at least one port: kubectl mpijob port-forward %s 6006 (or LOCAL:REMOTE, e.g. 8888:6006)", p.name)
	}
	for _, spec := range p.ports {
		if err := checkPortSpec(spec); err != nil {
			return err
		}
	}
	return p.validate()
}

// checkPortSpec checks REMOTE or LOCAL:REMOTE (LOCAL may be empty: a free
// port is chosen).
func checkPortSpec(spec string) error {
	local, remote, found := strings.Cut(spec, ":")
	if !found {
		local, remote = "", spec
	}
	for _, part := range []struct{ what, v string }{{"local", local}, {"remote", remote}} {
		if part.v == "" && part.what == "local" {
			continue
		}
		n, err := strconv.Atoi(part.v)
		if err != nil || n < 1 || n > 65535 {
			return usageErr("port %q: the %s port must be a number from 1 to 65535 (REMOTE or LOCAL:REMOTE, e.g. 8888:6006)", spec, part.what)
		}
	}
	return nil
}

// Run finds the pod and forwards until ctx ends or the pod goes.
func (p *portForwardOptions) Run(ctx context.Context) error {
	cl, pod, what, err := p.find(ctx, p.Options, p.name)
	if err != nil {
		return err
	}
	if cl.cfg == nil {
		return errors.New("port-forward needs a cluster connection")
	}
	fmt.Fprintf(p.ErrOut, "%s: pod %s\n", what, pod.Name)
	transport, upgrader, err := spdy.RoundTripperFor(cl.cfg)
	if err != nil {
		return err
	}
	url := cl.cs.CoreV1().RESTClient().Post().Resource("pods").Namespace(pod.Namespace).Name(pod.Name).SubResource("portforward").URL()
	dialer := spdy.NewDialer(upgrader, &http.Client{Transport: transport}, http.MethodPost, url)
	stop, ready := make(chan struct{}), make(chan struct{})
	go func() {
		<-ctx.Done()
		close(stop)
	}()
	fw, err := portforward.NewOnAddresses(dialer, p.address, p.ports, stop, ready, p.Out, p.ErrOut)
	if err != nil {
		return usageErr("%v", err)
	}
	return fw.ForwardPorts()
}
