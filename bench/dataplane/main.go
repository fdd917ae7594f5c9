// Command dataplane measures the MPI data plane of every flavour on the
// running local cluster, in one run:
//
//   - allreduce latency (8 B) and bus bandwidth (4 MiB) of
//     mpi-allreduce-bench between two Worker pods on the two real nodes,
//     against the same program with the same two ranks on the host (the
//     image run with the host's network, TCP between the ranks in both
//     cases), printed with the ratio pods / host (target ≥ 0.9 for
//     bandwidth);
//   - the Launcher's MPI start-up across 32 Workers packed on the two real
//     nodes: create → every Worker Ready, and mpirun's start → all 32 ranks
//     done (target < 2 min, AC8).
//
// The images are built and imported first where missing. Both machines'
// "nodes" share this host's two cores: the figures are this machine's.
//
//	go run ./bench/dataplane [-flavours openmpi,mpich,openmpi5,intel] [-workers 32] [-mca NAME=VALUE ...]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mpijob/mpijob/pkg/localcluster"
)

// flavour is how one MPI runs the benchmark: in the Launcher over the
// Workers, and with two local ranks on the host.
type flavour struct {
	image, runtime string
	launch         []string // the Launcher's command before the program
	local          []string // two local ranks, TCP only
	localEnv       []string
}

var flavours = map[string]flavour{
	"openmpi": {image: "openmpi", runtime: "mpi-openmpi", launch: []string{"mpirun"},
		local: []string{"mpirun", "-np", "2", "--mca", "btl", "tcp,self"}},
	"mpich": {image: "mpich", runtime: "mpi-mpich", launch: []string{"mpijob-mpiexec"},
		local: []string{"mpiexec.hydra", "-launcher", "fork", "-n", "2"}},
	// OpenMPI 5's TCP BTL will not pair two ranks over one address of one
	// host: on the host they use the loopback device.
	"openmpi5": {image: "openmpi5", runtime: "mpi-openmpi5", launch: []string{"mpirun"},
		local: []string{"mpirun", "-np", "2", "--mca", "btl", "tcp,self", "--mca", "btl_tcp_if_include", "lo"}},
	"intel": {image: "intel", runtime: "mpi-intel", launch: []string{"mpijob-mpiexec"},
		local: []string{"mpiexec.hydra", "-launcher", "fork", "-n", "2"}, localEnv: []string{"I_MPI_FABRICS=ofi"}},
}

func main() {
	names := flag.String("flavours", "openmpi,mpich,openmpi5,intel", "flavours to measure")
	workers := flag.Int("workers", 32, "Workers for the start-up measure (0 skips it)")
	flag.Func("mca", "an OpenMPI MCA parameter NAME=VALUE given to mpirun in the pods and on the host (OpenMPI flavours only; repeatable), to try a setting against the runtime's", func(v string) error {
		name, value, ok := strings.Cut(v, "=")
		if !ok || name == "" {
			return fmt.Errorf("want NAME=VALUE, e.g. btl_tcp_links=2, got %q", v)
		}
		mca = append(mca, "--mca", name, value)
		return nil
	})
	flag.Parse()
	if err := run(strings.Split(*names, ","), *workers); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

// mca are the -mca flags as mpirun arguments.
var mca []string

// withMCA puts the -mca settings after an OpenMPI mpirun.
func withMCA(cmd []string) []string {
	if len(mca) == 0 || len(cmd) == 0 || cmd[0] != "mpirun" {
		return cmd
	}
	return append(append([]string{cmd[0]}, mca...), cmd[1:]...)
}

type figures struct{ latUS, bwMBps float64 }

var benchLine = regexp.MustCompile(`allreduce bytes=(\d+) iters=\d+ avg_us=([0-9.]+) busbw_MBps=([0-9.]+)`)

// parse takes the 8 B latency and the largest size's bus bandwidth.
func parse(out string) (figures, error) {
	var f figures
	var largest int64
	for _, m := range benchLine.FindAllStringSubmatch(out, -1) {
		b, _ := strconv.ParseInt(m[1], 10, 64)
		us, _ := strconv.ParseFloat(m[2], 64)
		bw, _ := strconv.ParseFloat(m[3], 64)
		if b == 8 {
			f.latUS = us
		}
		if b > largest {
			largest, f.bwMBps = b, bw
		}
	}
	if largest == 0 {
		return f, fmt.Errorf("no allreduce lines in:\n%s", out)
	}
	return f, nil
}

func run(names []string, workers int) error {
	ctx := context.Background()
	wd, _ := os.Getwd()
	opts, err := localcluster.DefaultOptions(wd)
	if err != nil {
		return err
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", opts.KubeconfigPath())
	if err != nil {
		return fmt.Errorf("no local cluster (make dev-detach): %w", err)
	}
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = trainer.AddToScheme(scheme)
	cl, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	cs := kubernetes.NewForConfigOrDie(cfg)
	var imgs []localcluster.Image
	for _, n := range names {
		f, ok := flavours[n]
		if !ok {
			return fmt.Errorf("unknown flavour %q", n)
		}
		im, _ := localcluster.ImageNamed(f.image)
		imgs = append(imgs, im)
	}
	if err := localcluster.EnsureImages(ctx, opts, os.Stderr, imgs, "for bench/dataplane"); err != nil {
		return err
	}
	ns := "bench-dataplane-" + utilrand.String(4)
	if err := cl.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		return err
	}
	defer func() {
		_ = cl.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	}()

	w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "flavour\tpods lat 8B (us)\thost lat 8B (us)\tlat host/pods\tpods busbw 4MiB (MB/s)\thost busbw (MB/s)\tbusbw pods/host\t")
	for i, n := range names {
		f := flavours[n]
		fmt.Fprintf(os.Stderr, "%s: two Worker pods on the two nodes ...\n", n)
		log, err := runJobOn(ctx, cl, cs, ns, "ar-"+n, f.runtime, 2, withMCA(append(f.launch, "/usr/local/bin/mpi-allreduce-bench")), 5*time.Minute)
		if err != nil {
			return fmt.Errorf("%s in pods: %w", n, err)
		}
		pods, err := parse(log)
		if err != nil {
			return fmt.Errorf("%s in pods: %w", n, err)
		}
		fmt.Fprintf(os.Stderr, "%s: the same two ranks on the host ...\n", n)
		out, err := localcluster.RunOnHost(ctx, opts, imgs[i].Ref, f.localEnv, withMCA(append(f.local, "/usr/local/bin/mpi-allreduce-bench"))...)
		if err != nil {
			return fmt.Errorf("%s on the host: %w", n, err)
		}
		host, err := parse(out)
		if err != nil {
			return fmt.Errorf("%s on the host: %w", n, err)
		}
		fmt.Fprintf(w, "%s\t%.1f\t%.1f\t%.2f\t%.0f\t%.0f\t%.2f\t\n", n, pods.latUS, host.latUS, host.latUS/pods.latUS, pods.bwMBps, host.bwMBps, pods.bwMBps/host.bwMBps)
	}
	_ = w.Flush()
	if workers <= 0 {
		return nil
	}
	return startup(ctx, cl, cs, ns, workers)
}

// startup packs workers Workers on the two real nodes (a copy of
// mpi-openmpi without its one-Worker-per-node rule and with small requests)
// and times the Launcher's mpirun of mpi-hello over all of them.
func startup(ctx context.Context, cl client.Client, cs kubernetes.Interface, ns string, workers int) error {
	base := &trainer.ClusterTrainingRuntime{}
	if err := cl.Get(ctx, client.ObjectKey{Name: "mpi-openmpi"}, base); err != nil {
		return err
	}
	rt := &trainer.ClusterTrainingRuntime{ObjectMeta: metav1.ObjectMeta{Name: "bench-packed-" + utilrand.String(4), Labels: base.Labels}, Spec: *base.Spec.DeepCopy()}
	for i := range rt.Spec.Template.Spec.ReplicatedJobs {
		pod := &rt.Spec.Template.Spec.ReplicatedJobs[i].Template.Spec.Template.Spec
		pod.Affinity = nil
		for j := range pod.Containers {
			pod.Containers[j].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("32Mi")}
		}
	}
	if err := cl.Create(ctx, rt); err != nil {
		return err
	}
	defer func() { _ = cl.Delete(context.Background(), rt) }()
	script := `s=$(date +%s.%N); mpirun /usr/local/bin/mpi-hello > /tmp/out 2>&1; rc=$?; e=$(date +%s.%N)
tail -n 2 /tmp/out
echo "ranks reported: $(grep -c 'mpi-hello: rank' /tmp/out)"
python3 -c "print('mpirun start-up and run: %.1f s, exit $rc' % ($e - $s))"
exit $rc`
	fmt.Fprintf(os.Stderr, "start-up: %d Workers packed on the two real nodes ...\n", workers)
	began := time.Now()
	log, err := runJobOn(ctx, cl, cs, ns, "startup", rt.Name, int32(workers), []string{"bash", "-c", script}, 10*time.Minute)
	if err != nil {
		return err
	}
	fmt.Printf("\nstart-up across %d Workers on 2 nodes: create → job Complete %s\n%s", workers, time.Since(began).Round(100*time.Millisecond), log)
	return nil
}

// runJobOn runs a TrainJob on ClusterTrainingRuntime runtimeName with one
// slot per Worker and returns the Launcher's log once it completes.
func runJobOn(ctx context.Context, cl client.Client, cs kubernetes.Interface, ns, name, runtimeName string, workers int32, cmd []string, timeout time.Duration) (string, error) {
	tj := &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: trainer.TrainJobSpec{
		RuntimeRef: trainer.RuntimeRef{Name: runtimeName, APIGroup: ptr.To(trainer.GroupVersion.Group), Kind: ptr.To(trainer.ClusterTrainingRuntimeKind)},
		Trainer:    &trainer.Trainer{NumNodes: ptr.To(workers), NumProcPerNode: ptr.To(int32(1)), Command: cmd},
	}}
	if err := cl.Create(ctx, tj); err != nil {
		return "", err
	}
	var last string
	err := wait.PollUntilContextTimeout(ctx, time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		cur := &trainer.TrainJob{}
		if err := cl.Get(ctx, client.ObjectKeyFromObject(tj), cur); err != nil {
			return false, nil //nolint:nilerr // keep polling
		}
		for _, c := range cur.Status.Conditions {
			if c.Status == metav1.ConditionTrue && (c.Type == trainer.TrainJobComplete || c.Type == trainer.TrainJobFailed) {
				last = c.Type
				return true, nil
			}
		}
		return false, nil
	})
	pods, lerr := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "jobset.sigs.k8s.io/jobset-name=" + name + ",jobset.sigs.k8s.io/replicatedjob-name=launcher"})
	log := ""
	if lerr == nil && len(pods.Items) > 0 {
		b, _ := cs.CoreV1().Pods(ns).GetLogs(pods.Items[0].Name, &corev1.PodLogOptions{}).DoRaw(ctx)
		log = string(b)
	}
	if err != nil {
		return log, fmt.Errorf("job %s/%s did not finish in %s", ns, name, timeout)
	}
	if last != trainer.TrainJobComplete {
		return log, fmt.Errorf("job %s/%s failed:\n%s", ns, name, log)
	}
	return log, nil
}
