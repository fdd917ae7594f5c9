package localcluster

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/mpijob/mpijob/pkg/api"
	"github.com/mpijob/mpijob/pkg/localcluster/images"
)

// imageBuilderProcess is the host process that builds on-demand images
// when a pod on a real node first asks for one.
const imageBuilderProcess = "image-builder"

// startImageBuilder runs `mpijob-dev image-builder` beside the cluster.
func (c *Cluster) startImageBuilder() error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	env := []string{"MPIJOB_CACHE_DIR=" + c.opts.CacheDir}
	if c.opts.PrebuildImages {
		env = append(env, prebuildEnv+"=1")
	}
	return c.startProcess(imageBuilderProcess, self, []string{"image-builder"}, env)
}

// prebuildEnv tells the image builder to build every on-demand image that
// is missing as soon as it starts (make dev; make dev IMAGES=0 does not).
const prebuildEnv = "MPIJOB_PREBUILD_IMAGES"

// prebuild builds and imports every on-demand image that is missing, two
// at a time where the machine has the cores; a pod that asks for one
// meanwhile waits for the same build (EnsureImages holds a lock per image).
func prebuild(ctx context.Context, opts Options, out io.Writer) {
	var missing []Image
	for _, im := range Images {
		if !im.BuiltForPods() {
			continue
		}
		if tar, err := im.Tar(opts.images()); err != nil || !fileExists(tar) {
			missing = append(missing, im)
		}
	}
	if len(missing) == 0 {
		return
	}
	fmt.Fprintf(out, "image-builder: building %d images ahead of their first use\n", len(missing))
	sem := make(chan struct{}, max(1, runtime.NumCPU()/2))
	var wg sync.WaitGroup
	for _, im := range missing {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			if _, err := buildTimed(ctx, opts, out, im, "built ahead of its first use (make dev)"); err != nil {
				fmt.Fprintf(out, "image-builder: %v\n", err)
			}
		}()
	}
	wg.Wait()
}

// OnDemandWanted returns the on-demand images pod refers to that node's
// containerd does not hold yet (no import marker for their current build).
func OnDemandWanted(opts Options, pod *corev1.Pod) []Image {
	n, ok := nodeOf(opts, pod)
	if !ok {
		return nil
	}
	refs := imageRefs(pod)
	// An image the kubelet failed to pull is wanted even where the import
	// marker says it is there: the kubelet deletes unused images under disk
	// pressure.
	failed := sets.New[string]()
	for _, st := range append(append([]corev1.ContainerStatus{}, pod.Status.InitContainerStatuses...), pod.Status.ContainerStatuses...) {
		if w := st.State.Waiting; w != nil && (w.Reason == "ErrImagePull" || w.Reason == "ImagePullBackOff") {
			failed.Insert(st.Image)
		}
	}
	var out []Image
	for _, im := range Images {
		if !im.BuiltForPods() || !refs.Has(im.Ref) {
			continue
		}
		tar, err := im.Tar(opts.images())
		if err != nil || failed.Has(im.Ref) || !fileExists(n.importMarker(tar)) {
			out = append(out, im)
		}
	}
	return out
}

// GPUImagesOf returns the GPU images pod refers to where it is placed on a
// real node: the local cluster never imports those (Image.GPU), so the
// pod cannot start there.
func GPUImagesOf(opts Options, pod *corev1.Pod) []Image {
	if _, ok := nodeOf(opts, pod); !ok {
		return nil
	}
	refs := imageRefs(pod)
	var out []Image
	for _, im := range Images {
		if im.GPU && refs.Has(im.Ref) {
			out = append(out, im)
		}
	}
	return out
}

// imageRefs are the images pod's containers run.
func imageRefs(pod *corev1.Pod) sets.Set[string] {
	refs := sets.New[string]()
	for _, ct := range append(append([]corev1.Container{}, pod.Spec.InitContainers...), pod.Spec.Containers...) {
		refs.Insert(ct.Image)
	}
	return refs
}

// gpuImageMessage is the Warning a pod on a real node gets for a GPU image.
func gpuImageMessage(im Image) string {
	return fmt.Sprintf("%s is a GPU image: the local cluster's real nodes have no GPU and never hold it (6 GB). "+
		"Give the Workers GPUs (kubectl mpijob create --gpus 1 places them on the kwok GPU nodes), or run on a CPU runtime such as mpi-openmpi.", im.Ref)
}

// ServeImages watches the pods of the real nodes and, when one refers to an
// on-demand image its node lacks, builds the image (once, cached by its
// inputs) and imports it into every real node, telling the pod in Events
// what it waits for. The kubelet's next pull retry then starts it (its
// back-off grows to at most 5 minutes). It runs until ctx ends.
func ServeImages(ctx context.Context, opts Options, out io.Writer) error {
	cs, err := opts.clientset()
	if err != nil {
		return err
	}
	queue := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())
	defer queue.ShutDown()
	var mu sync.Mutex
	waiting := map[string][]*corev1.Pod{} // image name → pods told about it
	toldGPU := sets.New[types.UID]()      // pods told their GPU image is not here
	onPod := func(obj any) {
		pod, ok := obj.(*corev1.Pod)
		if !ok || pod.Status.Phase != corev1.PodPending {
			return
		}
		if gpu := GPUImagesOf(opts, pod); len(gpu) > 0 {
			mu.Lock()
			first := !toldGPU.Has(pod.UID)
			toldGPU.Insert(pod.UID)
			mu.Unlock()
			if first {
				go tell(ctx, cs, []*corev1.Pod{pod}, corev1.EventTypeWarning, api.EventGPUImageNotLocal, gpuImageMessage(gpu[0]))
			}
		}
		for _, im := range OnDemandWanted(opts, pod) {
			mu.Lock()
			waiting[im.Name] = append(waiting[im.Name], pod)
			mu.Unlock()
			queue.Add(im.Name)
		}
	}
	factory := informers.NewSharedInformerFactory(cs, 0)
	inf := factory.Core().V1().Pods().Informer()
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    onPod,
		UpdateFunc: func(_, obj any) { onPod(obj) },
		// The pods told of a GPU image are forgotten with the pod.
		DeleteFunc: func(obj any) {
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			if pod, ok := obj.(*corev1.Pod); ok {
				mu.Lock()
				toldGPU.Delete(pod.UID)
				mu.Unlock()
			}
		},
	}); err != nil {
		return err
	}
	factory.Start(ctx.Done())
	fmt.Fprintln(out, "image-builder: watching pods for on-demand images:", strings.Join(onDemandNames(), ", "))
	if os.Getenv(prebuildEnv) == "1" {
		go prebuild(ctx, opts, out)
	}
	go func() {
		<-ctx.Done()
		queue.ShutDown()
	}()
	served := map[string]time.Time{} // image name → when it was last imported
	// Images build side by side where the machine has the cores: one
	// build per two CPUs (each compiles with every core it is given).
	workers := max(1, runtime.NumCPU()/2)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for serveOne(ctx, opts, out, cs, queue, &mu, waiting, served) {
			}
		}()
	}
	wg.Wait()
	return nil
}

// serveOne builds the next image of queue for the pods waiting for it; it
// returns false once the queue shuts down.
func serveOne(ctx context.Context, opts Options, out io.Writer, cs kubernetes.Interface, queue workqueue.TypedRateLimitingInterface[string],
	mu *sync.Mutex, waiting map[string][]*corev1.Pod, served map[string]time.Time) bool {
	name, quit := queue.Get()
	if quit {
		return false
	}
	defer queue.Done(name)
	im, _ := ImageNamed(name)
	mu.Lock()
	pods := waiting[name]
	delete(waiting, name)
	recent := time.Since(served[name]) < 5*time.Minute
	mu.Unlock()
	// A pod that arrived while an earlier build of this image ran has
	// nothing left to wait for; nor has one whose pull failed before a
	// recent import (its kubelet retries on its own back-off).
	var still []*corev1.Pod
	for _, p := range pods {
		if len(OnDemandWanted(opts, p)) > 0 && (!recent || !importedOn(opts, p, im)) {
			still = append(still, p)
		}
	}
	if len(still) == 0 {
		return true
	}
	why := fmt.Sprintf("pod %s/%s uses it", still[0].Namespace, still[0].Name)
	tell(ctx, cs, still, corev1.EventTypeNormal, api.EventBuildingImage,
		fmt.Sprintf("The local cluster builds %s for its first use (%s; `make images` builds every image ahead). The pod starts at the kubelet's next pull after the import.", im.Ref, buildEstimate(opts, im)))
	took, err := buildTimed(ctx, opts, out, im, why)
	if err != nil {
		fmt.Fprintf(out, "image-builder: %v\n", err)
		tell(ctx, cs, still, corev1.EventTypeWarning, api.EventImageBuildFailed,
			fmt.Sprintf("The local cluster could not build %s: %s (log: .local/logs/%s.log; retried with back-off).", im.Ref, firstLine(err.Error()), imageBuilderProcess))
		queue.AddRateLimited(name)
		return true
	}
	tell(ctx, cs, still, corev1.EventTypeNormal, api.EventImageBuilt,
		fmt.Sprintf("%s was built and imported into every node in %s.", im.Ref, took.Round(time.Second)))
	mu.Lock()
	served[name] = time.Now()
	mu.Unlock()
	queue.Forget(name)
	return true
}

// importedOn reports whether the node of pod has im's import marker.
func importedOn(opts Options, pod *corev1.Pod, im Image) bool {
	n, ok := nodeOf(opts, pod)
	if !ok {
		return false
	}
	tar, err := im.Tar(opts.images())
	return err == nil && fileExists(n.importMarker(tar))
}

// nodeOf is the real node pod runs on; false for a kwok node or none.
func nodeOf(opts Options, pod *corev1.Pod) (realNode, bool) {
	for i := 1; i <= opts.RealNodes; i++ {
		if pod.Spec.NodeName == nodeName(i) {
			return New(opts, io.Discard).realNode(i), true
		}
	}
	return realNode{}, false
}

// typicalBuild is about how long each on-demand image takes to build on a
// 2-core machine with a warm package cache, for its first build there.
var typicalBuild = map[string]time.Duration{
	"openmpi5": 9 * time.Minute, "horovod": 12 * time.Minute, "deepspeed": 12 * time.Minute,
}

// buildEstimate says about how long im takes to build here: its last
// build's time on this machine, else a typical one.
func buildEstimate(opts Options, im Image) string {
	if b, err := os.ReadFile(buildTimeFile(opts, im)); err == nil {
		if d, err := time.ParseDuration(strings.TrimSpace(string(b))); err == nil {
			return fmt.Sprintf("about %s, as its last build here took", d.Round(time.Minute).String())
		}
	}
	d, ok := typicalBuild[im.Name]
	if !ok {
		d = 5 * time.Minute
	}
	return fmt.Sprintf("typically about %s on a 2-core machine", d.String())
}

func buildTimeFile(opts Options, im Image) string {
	return filepath.Join(images.Dir(opts.images()), im.Name+".build-time")
}

// buildTimed builds and imports im (EnsureImages) and, when it worked,
// keeps how long it took for the next estimate.
func buildTimed(ctx context.Context, opts Options, out io.Writer, im Image, why string) (time.Duration, error) {
	began := time.Now()
	if err := EnsureImages(ctx, opts, out, []Image{im}, why); err != nil {
		return 0, err
	}
	took := time.Since(began)
	recordBuildTime(opts, im, took)
	return took, nil
}

// recordBuildTime keeps how long im took to build, for the next estimate.
func recordBuildTime(opts Options, im Image, d time.Duration) {
	_ = os.WriteFile(buildTimeFile(opts, im), []byte(d.Round(time.Second).String()+"\n"), 0o644)
}

func onDemandNames() []string {
	var out []string
	for _, im := range Images {
		if im.BuiltForPods() {
			out = append(out, im.Name)
		}
	}
	return out
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// tell records an Event on each pod, as the local cluster's image builder.
func tell(ctx context.Context, cs kubernetes.Interface, pods []*corev1.Pod, typ, reason, msg string) {
	now := metav1.NewTime(time.Now())
	for _, p := range pods {
		ev := &corev1.Event{
			ObjectMeta:     metav1.ObjectMeta{GenerateName: p.Name + ".", Namespace: p.Namespace},
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: p.Namespace, Name: p.Name, UID: p.UID, APIVersion: "v1"},
			Reason:         reason, Message: msg, Type: typ,
			Source:         corev1.EventSource{Component: api.ImageBuilderComponent},
			FirstTimestamp: now, LastTimestamp: now, Count: 1,
		}
		_, _ = cs.CoreV1().Events(p.Namespace).Create(ctx, ev, metav1.CreateOptions{})
	}
}
