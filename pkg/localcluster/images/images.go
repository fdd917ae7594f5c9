// Package images builds the local cluster's MPI images from Debian packages
// (and pinned wheels where Debian has none) into OCI tars in the cache,
// keyed by their inputs, and pushes them to a registry.
package images

import (
	"archive/tar"
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/klauspost/compress/gzip"
)

// Image is an MPI image the local cluster builds from Debian packages (and,
// where Debian has no package, pinned wheels from PyPI) and imports into
// every real node, under the name the runtimes reference.
type Image struct {
	// Name is the short name `mpijob-dev images NAME` and the tests use.
	Name string
	// Ref is the image reference pods use (imagePullPolicy IfNotPresent).
	Ref string
	// Dir is the folder under images/ with its Containerfile.
	Dir string
	// Suite is the Debian release the image is made from (default bookworm).
	Suite string
	// Packages are installed into the image.
	Packages []string
	// BuildPackages compile mpi-hello; they stay out of the image.
	BuildPackages []string
	// Setup runs in the image (and in the throw-away build copy) after the
	// packages, as root: a virtual environment with pinned wheels, say.
	Setup string
	// BuildSetup runs in the build copy only, after Setup (headers,
	// wrappers, compiling wheels into /tmp/wheels).
	BuildSetup string
	// Install runs in the image only, after Setup, with the build copy's
	// /tmp/wheels in /tmp/wheels (removed after): wheels compiled there
	// install here without their compilers.
	Install string
	// MPICC compiles mpi-hello against this image's MPI.
	MPICC string
	// Env is the image's environment.
	Env []string
	// Files are copied from images/ (key) to the image (value), mode 0755.
	Files map[string]string
	// OnDemand images are not built by `make dev`: `make images`, the
	// local cluster's image builder (when a pod first asks for one) and the
	// tests that need them build them, once, cached by their inputs.
	OnDemand bool
	// GPU images are for Workers with GPUs: `make images` builds them into
	// the cache and pushes them with REGISTRY, but the local cluster never
	// imports them into its real nodes, nor builds one when a pod asks for
	// it. Those nodes have no GPU (its GPU nodes are kwok's, which run no
	// container), and the CUDA image is about 6 GB unpacked, twice that in
	// each node's containerd.
	GPU bool
	// BuildSpace is the free space a build needs in the image cache (0:
	// not checked): a build that would fill the disk the nodes' kubelets
	// watch is refused before it starts, with what is free.
	BuildSpace uint64
	// Check runs in the finished image as root, after Install; a build
	// whose check fails fails. The CUDA image proves there, on a machine
	// without a GPU, that its PyTorch is a CUDA build and that NCCL loads.
	Check string
}

// BuiltForPods says whether the local cluster builds and imports im when a
// pod first asks for it (and ahead, with make dev's --prebuild-images): the
// on-demand images, but not the GPU ones, which its nodes never hold.
func (im Image) BuiltForPods() bool { return im.OnDemand && !im.GPU }

// suite is the Debian release the image is made from.
func (im Image) suite() string {
	if im.Suite == "" {
		return debianSuite
	}
	return im.Suite
}

// debianSuite and debianMirror are where debootstrap and apt take packages.
const (
	debianSuite  = "bookworm"
	debianMirror = "http://deb.debian.org/debian"
	// imageRecipeVersion changes when the build steps below change.
	imageRecipeVersion = "1"
	// imageFormat names how image tars are written (OCI image layout).
	imageFormat = "oci-layout"
)

// cPrograms are compiled against each image's MPI into /usr/local/bin
// (sources in images/common).
var cPrograms = []string{"mpi-hello", "mpi-allreduce-bench"}

// commonFiles are copied as they are into every MPI image: a file under
// images/ and where it goes. The local build, the Containerfiles and the
// images' hash all read this one list.
var commonFiles = []struct{ src, dst string }{
	{"common/sshd_config", "/home/mpiuser/.sshd_config"},
	{"common/ssh_config", "/etc/ssh/ssh_config.d/mpi.conf"},
	{"common/mpijob-wait-resolve", "/usr/local/bin/mpijob-wait-resolve"},
}

// examples are the reference training programs every image carries in
// /opt/mpijob/examples (examples/training in the repository).
var examples = map[string]string{
	"../examples/training/digits_mpi4py.py": "/opt/mpijob/examples/digits_mpi4py.py",
	"../examples/training/digits_torch.py":  "/opt/mpijob/examples/digits_torch.py",
	"../examples/training/cnn_torch.py":     "/opt/mpijob/examples/cnn_torch.py",
	"../examples/training/mpijob_io.py":     "/opt/mpijob/examples/mpijob_io.py",
	// The SDK's checkpoint module, one file with no other part of the SDK:
	// the examples save and resume with it, and so can users' programs.
	"../sdk/python/mpijob/checkpoint.py": "/opt/mpijob/examples/mpijob_checkpoint.py",
	// The stack hook (kubectl mpijob stacks), which stacksHook has every
	// Python of the image import at start-up.
	"common/mpijob_stacks.py": stacksHookDir + "/mpijob_stacks.py",
}

// stacksHookDir holds the stack hook, images/common/mpijob_stacks.py.
const stacksHookDir = "/opt/mpijob/python"

// stacksHook writes mpijob-stacks.pth into the system Python's and each
// virtual environment's site-packages: a .pth's path line puts the hook's
// folder on sys.path and its import line runs the hook in every Python
// process that starts (python -S and -I skip it, as they skip site).
const stacksHook = `for d in /usr/lib/python3/dist-packages /opt/*/lib/python3*/site-packages; do if [ -d "$d" ]; then printf '%s\n' ` + stacksHookDir + ` 'import mpijob_stacks' > "$d/mpijob-stacks.pth"; fi; done
`

// withExamples adds the examples (and extra) to an image's files.
func withExamples(extra ...map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range examples {
		out[k] = v
	}
	for _, m := range extra {
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}

// compiler is what every image carries so that users compile MPI programs
// in it (mpicc, mpi.h): gcc and the C library's headers; each image adds
// its MPI's headers (libopenmpi-dev, the mpich wheel's, impi-devel).
var compiler = []string{"gcc", "libc6-dev"}

// withCompiler is an image's packages with the compiler.
func withCompiler(pkgs ...string) []string { return append(slices.Clone(compiler), pkgs...) }

// openmpiFiles and openmpiInstall put images/common/mpirun first on PATH as
// mpirun and mpiexec in the Open MPI images: with Open MPI 4 it lets a
// command line's -x options live beside the OMPI_MCA_mca_base_env_list that
// mpijob sets for data connections and PVCs (Open MPI 4 alone refuses
// both); with Open MPI 5 it maps --oversubscribe by slot, across the
// Workers, instead of by core onto the first one.
var openmpiFiles = map[string]string{"common/mpirun": "/usr/local/bin/mpirun"}

const openmpiInstall = "ln -sf mpirun /usr/local/bin/mpiexec\n"

var basePackages = []string{"openssh-server", "openssh-client", "python3", "python3-mpi4py", "ca-certificates", "procps", "iproute2"}

// Pinned wheels of the Intel MPI image: the Intel MPI runtime (Hydra,
// mpiexec.hydra, libmpi.so.12, libfabric) and its headers and compiler
// wrappers, as Intel publishes them on PyPI, and mpi4py's binary wheel,
// which loads the MPI library it finds at run time. 2021.18.1 is the newest
// impi-rt that carries its own libfabric: 2021.19.0 requires a libfabric
// wheel that PyPI does not have.
const (
	impiVersion   = "2021.18.1"
	mpi4pyVersion = "4.1.2"
	intelVenv     = "/opt/intel-mpi"
	// numpy and scikit-learn for the examples in the images whose Python
	// packages come from PyPI (the others take Debian's python3-sklearn).
	numpyVersion   = "2.3.5"
	sklearnVersion = "1.7.2"
	// boto3 reads and writes the examples' data and artifacts on S3 data
	// connections (Debian's python3-boto3 elsewhere).
	boto3Version = "1.44.5"

	mpichVersion = "5.0.2"
	mpichVenv    = "/opt/mpich"

	horovodVersion   = "0.28.1"
	horovodVenv      = "/opt/horovod"
	deepspeedVersion = "0.19.8"
	deepspeedVenv    = "/opt/deepspeed"

	// PyTorch's CUDA build from PyPI, the GPU image's: CUDA 13.2, cuDNN and
	// NCCL 2.30 come as NVIDIA's wheels (about 5 GB installed). CUDA 13
	// needs an NVIDIA driver of the 580 series or newer on the GPU nodes.
	torchCUDAVersion = "2.15.0"
	torchCUDAVenv    = "/opt/torch"

	// TensorFlow's CPU build for Python 3.11 (bookworm's): 2.20.0 is the
	// newest tensorflow-cpu on PyPI.
	tensorflowVersion = "2.20.0"
	tensorflowMinor   = "2.20"
)

// cudaCheck is the GPU image's Check: PyTorch is a CUDA build, and NCCL's
// library loads and says its version (neither needs a GPU).
const cudaCheck = `import torch, torch.cuda.nccl as nccl; ` +
	`assert torch.version.cuda, "torch " + torch.__version__ + " is not a CUDA build"; ` +
	`print("torch", torch.__version__, "CUDA", torch.version.cuda, "NCCL", ".".join(map(str, nccl.version())))`

// Images are the MPI images; their Containerfiles in images/ describe the
// same content for people who build with a container engine.
var Images = []Image{
	{
		Name: "openmpi", Ref: "ghcr.io/mpijob/openmpi:4.1", Dir: "openmpi",
		Packages: withCompiler("openmpi-bin", "python3-sklearn", "python3-torch", "python3-boto3", "libopenmpi-dev"), MPICC: "mpicc.openmpi",
		Install: openmpiInstall,
		Env:     []string{"OMPI_MCA_btl=tcp,self", "OMPI_MCA_btl_tcp_if_include=eth0", "OMPI_MCA_oob_tcp_if_include=eth0"},
		Files:   withExamples(openmpiFiles),
	},
	{
		// MPICH from the mpich wheel (ch4 over libfabric's TCP provider),
		// in a virtual environment first on PATH, with mpi4py's wheel
		// (which loads it). Debian's MPICH 4.0.2 is UCX-only and hung in
		// MPI_Finalize 7 times in 20 here.
		Name: "mpich", Ref: "ghcr.io/mpijob/mpich:5.0", Dir: "mpich", OnDemand: true,
		Packages: withCompiler("python3-venv"),
		Setup: fmt.Sprintf("python3 -m venv %[1]s\n%[1]s/bin/pip install -q --no-cache-dir mpich==%[2]s mpi4py==%[3]s numpy==%[4]s scikit-learn==%[5]s boto3==%[6]s\n",
			mpichVenv, mpichVersion, mpi4pyVersion, numpyVersion, sklearnVersion, boto3Version),
		MPICC: mpichVenv + "/bin/mpicc",
		Env: []string{
			"PATH=" + mpichVenv + "/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
			// TCP through libfabric: pods have no RDMA devices. Ranks on one
			// Worker talk over it too: MPICH's shared-memory path moves
			// large messages with process_vm_readv, which needs
			// CAP_SYS_PTRACE (a 38 KB MPI_Bcast failed without it).
			"MPIR_CVAR_CH4_NETMOD=ofi", "FI_PROVIDER=tcp", "FI_TCP_IFACE=eth0", "MPIR_CVAR_NOLOCAL=1",
		},
		// mpirun and mpiexec run mpijob-mpiexec in a Launcher
		// (common/mpirun-hydra): Hydra's own ran one rank, on the Launcher.
		Install: fmt.Sprintf("ln -sf /usr/local/bin/mpirun-hydra %[1]s/bin/mpirun\nln -sf /usr/local/bin/mpirun-hydra %[1]s/bin/mpiexec\n", mpichVenv),
		Files: withExamples(map[string]string{
			"common/mpijob-mpiexec": "/usr/local/bin/mpijob-mpiexec",
			"common/mpirun-hydra":   "/usr/local/bin/mpirun-hydra",
		}),
	},
	{
		// OpenMPI 5 (PRRTE) from Debian trixie; the mpi-openmpi5 runtime
		// points PRRTE at Trainer's hostfile.
		Name: "openmpi5", Ref: "ghcr.io/mpijob/openmpi5:5.0", Dir: "openmpi5", Suite: "trixie", OnDemand: true,
		Packages: withCompiler("openmpi-bin", "python3-sklearn", "python3-torch", "python3-boto3", "libopenmpi-dev"), MPICC: "mpicc.openmpi",
		Install: openmpiInstall,
		Env:     []string{"OMPI_MCA_btl=tcp,self", "OMPI_MCA_btl_tcp_if_include=eth0", "PRTE_MCA_prte_if_include=eth0"},
		Files:   withExamples(openmpiFiles),
	},
	{
		// The GPU image, for the mpi-openmpi-gpu runtime's Workers: the
		// OpenMPI 4.1 image with PyTorch's CUDA build from PyPI in a
		// virtual environment first on PATH, over Debian's mpi4py,
		// scikit-learn and boto3 (--system-site-packages). Its Launcher
		// runs the CPU image, with the same OpenMPI. The ranks meet over
		// NCCL on the pod network (eth0).
		Name: "openmpi-cuda", Ref: "ghcr.io/mpijob/openmpi-cuda:4.1", Dir: "openmpi-cuda", OnDemand: true, GPU: true,
		// Measured: a 6.5 GB root filesystem, a 3.7 GB gzipped layer, and
		// the layer twice more (the OCI layout, then the tar) at the end.
		BuildSpace: 20 << 30,
		Packages:   withCompiler("openmpi-bin", "python3-sklearn", "python3-boto3", "python3-venv", "libopenmpi-dev"), MPICC: "mpicc.openmpi",
		Install: fmt.Sprintf("python3 -m venv --system-site-packages %[1]s\n%[1]s/bin/pip install -q --no-cache-dir torch==%[2]s\n", torchCUDAVenv, torchCUDAVersion) + openmpiInstall,
		Check:   torchCUDAVenv + "/bin/python3 -c '" + cudaCheck + "'\n",
		Env: []string{
			"PATH=" + torchCUDAVenv + "/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
			"OMPI_MCA_btl=tcp,self", "OMPI_MCA_btl_tcp_if_include=eth0", "OMPI_MCA_oob_tcp_if_include=eth0",
			// NCCL and gloo pick the pod's interface, not the loopback.
			"NCCL_SOCKET_IFNAME=eth0", "GLOO_SOCKET_IFNAME=eth0",
		},
		Files: withExamples(openmpiFiles),
	},
	// Intel MPI from Intel's wheels (impi-rt), in a virtual environment
	// first on PATH; Debian's OpenMPI-built python3-mpi4py stays out of it.
	intelMPI("intel", "ghcr.io/mpijob/intel-mpi:2021.18", "intel", ""),
	// The same with TensorFlow's CPU wheel from PyPI: a TensorFlow program
	// that the mpi-intel runtime runs (--image), data-parallel over Intel
	// MPI through mpi4py (examples/training/digits_tensorflow.py).
	intelMPI("intel-tensorflow", "ghcr.io/mpijob/intel-tensorflow:"+tensorflowMinor, "intel-tensorflow", "tensorflow-cpu=="+tensorflowVersion,
		map[string]string{"../examples/training/digits_tensorflow.py": "/opt/mpijob/examples/digits_tensorflow.py"}),
	{
		// Horovod built against Debian's CPU PyTorch and OpenMPI 4.1: the
		// wheel is compiled in the build copy and installed without the
		// compilers.
		Name: "horovod", Ref: "ghcr.io/mpijob/horovod:0.28", Dir: "horovod", OnDemand: true,
		Packages:      withCompiler("openmpi-bin", "python3-torch", "python3-torchvision", "python3-sklearn", "python3-boto3", "python3-venv", "libopenmpi-dev"),
		BuildPackages: []string{"g++", "make", "cmake", "libtorch-dev", "pybind11-dev", "python3-dev", "python3-setuptools", "python3-wheel"},
		Setup:         fmt.Sprintf("python3 -m venv --system-site-packages %s\n", horovodVenv),
		BuildSetup: fmt.Sprintf("HOROVOD_WITH_MPI=1 HOROVOD_WITH_PYTORCH=1 HOROVOD_WITHOUT_TENSORFLOW=1 HOROVOD_WITHOUT_MXNET=1 HOROVOD_WITHOUT_GLOO=1 HOROVOD_CPU_OPERATIONS=MPI MAKEFLAGS=-j2 "+
			"%s/bin/pip wheel -q --no-cache-dir --no-deps --no-build-isolation -w /tmp/wheels horovod==%s\n", horovodVenv, horovodVersion),
		Install: fmt.Sprintf("%s/bin/pip install -q --no-cache-dir /tmp/wheels/horovod-*.whl\n", horovodVenv) + openmpiInstall,
		MPICC:   "mpicc.openmpi",
		Env: []string{
			"PATH=" + horovodVenv + "/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
			"OMPI_MCA_btl=tcp,self", "OMPI_MCA_btl_tcp_if_include=eth0", "OMPI_MCA_oob_tcp_if_include=eth0",
		},
		Files: withExamples(openmpiFiles, map[string]string{
			"../examples/training/digits_horovod.py": "/opt/mpijob/examples/digits_horovod.py",
			"../examples/training/cnn_horovod.py":    "/opt/mpijob/examples/cnn_horovod.py",
		}),
	},
	{
		// DeepSpeed on Debian trixie's CPU PyTorch 2.6 and OpenMPI 5: mpirun
		// starts the ranks, DeepSpeed finds them through MPI and talks gloo.
		Name: "deepspeed", Ref: "ghcr.io/mpijob/deepspeed:0.19", Dir: "deepspeed", Suite: "trixie", OnDemand: true,
		Packages: withCompiler("openmpi-bin", "python3-torch", "python3-sklearn", "python3-boto3", "python3-venv", "libopenmpi-dev"),
		// DeepSpeed's CPU collectives JIT-compile a shared-memory op at every
		// start unless the wheel carries it: compile it here, with the
		// PyTorch headers, and install the wheel without the compilers.
		BuildPackages: []string{"g++", "libtorch-dev", "pybind11-dev", "python3-dev", "python3-setuptools"},
		Setup:         fmt.Sprintf("python3 -m venv --system-site-packages %s\n", deepspeedVenv),
		BuildSetup: fmt.Sprintf("DS_BUILD_OPS=0 DS_BUILD_SHM_COMM=1 DS_ACCELERATOR=cpu MAX_JOBS=2 "+
			"%s/bin/pip wheel -q --no-cache-dir --no-deps --no-build-isolation -w /tmp/wheels deepspeed==%s\n", deepspeedVenv, deepspeedVersion),
		Install: fmt.Sprintf("%s/bin/pip install -q --no-cache-dir /tmp/wheels/deepspeed-*.whl\n", deepspeedVenv) + openmpiInstall,
		MPICC:   "mpicc.openmpi",
		Env: []string{
			"PATH=" + deepspeedVenv + "/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
			"OMPI_MCA_btl=tcp,self", "OMPI_MCA_btl_tcp_if_include=eth0", "PRTE_MCA_prte_if_include=eth0",
			// Debian's PyTorch has no libuv: torch.distributed's store must not ask for it.
			"DS_ACCELERATOR=cpu", "USE_LIBUV=0",
		},
		Files: withExamples(openmpiFiles, map[string]string{"../examples/training/digits_deepspeed.py": "/opt/mpijob/examples/digits_deepspeed.py"}),
	},
}

// intelMPI is the recipe of an Intel MPI image, with more pinned wheels
// (space-separated) and files when given. The wheels install in the image
// only (Install), not in the build copy that compiles mpi-hello.
func intelMPI(name, ref, dir, wheels string, files ...map[string]string) Image {
	install := ""
	if wheels != "" {
		install = fmt.Sprintf("%s/bin/pip install -q --no-cache-dir %s\n", intelVenv, wheels)
	}
	return Image{
		Name: name, Ref: ref, Dir: dir, OnDemand: true,
		Packages: withCompiler("python3-venv"),
		// impi-devel: mpi.h and the compiler wrappers, so programs compile
		// in the image as they do with the other MPIs.
		Setup: fmt.Sprintf("python3 -m venv %[1]s\n%[1]s/bin/pip install -q --no-cache-dir impi-rt==%[2]s impi-devel==%[2]s mpi4py==%[3]s numpy==%[4]s scikit-learn==%[5]s boto3==%[6]s\n",
			intelVenv, impiVersion, mpi4pyVersion, numpyVersion, sklearnVersion, boto3Version),
		Install: install,
		// Intel's wrapper finds mpi.h through I_MPI_ROOT.
		MPICC: "I_MPI_ROOT=" + intelVenv + " " + intelVenv + "/bin/mpicc",
		Env: []string{
			"PATH=" + intelVenv + "/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
			"I_MPI_ROOT=" + intelVenv, "LD_LIBRARY_PATH=" + intelVenv + "/lib",
			// TCP through libfabric: pods have no RDMA devices.
			"FI_PROVIDER=tcp", "I_MPI_FABRICS=shm:ofi", "I_MPI_HYDRA_IFACE=eth0", "FI_TCP_IFACE=eth0",
		},
		Files: withExamples(append([]map[string]string{{"common/mpijob-mpiexec": "/usr/local/bin/mpijob-mpiexec"}}, files...)...),
	}
}

// ImageNamed returns the image with short name or reference n.
func ImageNamed(n string) (Image, bool) {
	for _, im := range Images {
		if im.Name == n || im.Ref == n {
			return im, true
		}
	}
	return Image{}, false
}

// ImageNames lists the images' short names.
func ImageNames() []string {
	var out []string
	for _, im := range Images {
		out = append(out, im.Name)
	}
	return out
}

// Dir is where the built images are kept.
func Dir(opts Options) string { return filepath.Join(opts.CacheDir, "images") }

func (im Image) tarPath(opts Options, hash string) string {
	return filepath.Join(Dir(opts), im.Dir+"-"+hash+".tar")
}

// imageHash covers everything that decides an image's content.
func imageHash(opts Options, parts ...string) (string, error) {
	h := sha256.New()
	fmt.Fprintf(h, "%s %s %s\n", imageRecipeVersion, debianSuite, strings.Join(parts, "\n"))
	inputs := []string{"common/mpi-hello.c", "common/mpi-allreduce-bench.c"}
	for _, f := range commonFiles {
		inputs = append(inputs, f.src)
	}
	for _, f := range append(inputs, "pause/pause.c") {
		b, err := os.ReadFile(filepath.Join(opts.RepoRoot, "images", f))
		if err != nil {
			return "", err
		}
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil))[:12], nil
}

// Tar returns where image im's build is kept: its name carries a hash of
// everything that decides its content, so a changed input means a new build.
func (im Image) Tar(opts Options) (string, error) {
	parts := append(append(append([]string{im.Ref, imageFormat}, basePackages...), im.Packages...), im.Env...)
	// Added fields count only where set, so older images keep their hash.
	if im.Suite != "" {
		parts = append(parts, "suite "+im.Suite)
	}
	if sshEnv(im.Env) != "" {
		parts = append(parts, "sshd-setenv-one-line")
	}
	if im.Check != "" {
		parts = append(parts, "check "+im.Check)
	}
	parts = append(parts, "stacks-hook "+stacksHook)
	if im.Setup != "" || im.BuildSetup != "" || im.Install != "" {
		parts = append(parts, "setup "+im.Setup, "build-setup "+im.BuildSetup, "install "+im.Install, "mpicc "+im.MPICC)
	}
	for _, src := range sortedKeys(im.Files) {
		b, err := os.ReadFile(filepath.Join(opts.RepoRoot, "images", src))
		if err != nil {
			return "", err
		}
		parts = append(parts, src, im.Files[src], string(b))
	}
	h, err := imageHash(opts, parts...)
	if err != nil {
		return "", err
	}
	return im.tarPath(opts, h), nil
}

func pauseTar(opts Options) (string, error) {
	h, err := imageHash(opts, "pause", imageFormat)
	if err != nil {
		return "", err
	}
	return filepath.Join(Dir(opts), "pause-"+h+".tar"), nil
}

// ImageTars returns the tar of every image the nodes import, pause first:
// the images `make dev` builds, and the on-demand ones already built.
func ImageTars(opts Options) ([]string, error) {
	pause, err := pauseTar(opts)
	if err != nil {
		return nil, err
	}
	tars := []string{pause}
	for _, im := range Images {
		t, err := im.Tar(opts)
		if err != nil {
			return nil, err
		}
		if im.GPU || im.OnDemand && !fileExists(t) {
			continue
		}
		tars = append(tars, t)
	}
	return tars, nil
}

// Base are the images every cluster has from the start (the others are
// built on first use).
func Base() []Image {
	var eager []Image
	for _, im := range Images {
		if !im.OnDemand {
			eager = append(eager, im)
		}
	}
	return eager
}

// BuildImagesOf builds the pause image and each of imgs that is missing,
// saying why (when why is set), and returns their tars in order.
func BuildImagesOf(ctx context.Context, opts Options, p Progress, imgs []Image, why string) ([]string, error) {
	if err := os.MkdirAll(Dir(opts), 0o755); err != nil {
		return nil, err
	}
	// One build at a time per cache: `make images`, the tests and `up`
	// may ask for the same image at once.
	unlock, err := LockFile(filepath.Join(Dir(opts), ".lock"))
	if err != nil {
		return nil, err
	}
	defer unlock()
	pause, err := pauseTar(opts)
	if err != nil {
		return nil, err
	}
	if !fileExists(pause) {
		done := p.Step("building the pause image (static C binary)")
		if err := buildPause(ctx, opts, pause); err != nil {
			return nil, err
		}
		done()
	}
	tars := make([]string, len(imgs))
	var todo []int
	for i, im := range imgs {
		if tars[i], err = im.Tar(opts); err != nil {
			return nil, err
		}
		if !fileExists(tars[i]) {
			if err := roomFor(im, Dir(opts)); err != nil {
				return nil, err
			}
			todo = append(todo, i)
		}
	}
	// One base root filesystem per Debian release, shared by its images.
	bases := map[string]string{}
	for _, i := range todo {
		suite := imgs[i].suite()
		if _, ok := bases[suite]; ok {
			continue
		}
		key := []string{"base"}
		if suite != debianSuite {
			key = append(key, suite)
		}
		baseHash, err := imageHash(opts, append(key, basePackages...)...)
		if err != nil {
			return nil, err
		}
		base := filepath.Join(Dir(opts), "rootfs", "base-"+suite+"-"+baseHash)
		if !fileExists(filepath.Join(base, "etc", "os-release")) {
			done := p.Step("debootstrap %s and install %s (first build takes minutes)", suite, strings.Join(basePackages, " "))
			if err := buildBase(ctx, suite, base); err != nil {
				return nil, err
			}
			done()
		}
		bases[suite] = base
	}
	var wg sync.WaitGroup
	errs := make([]error, len(todo))
	for k, i := range todo {
		wg.Add(1)
		go func() {
			defer wg.Done()
			im := imgs[i]
			what := strings.Join(im.Packages, " ")
			if im.Setup != "" {
				what += " + pinned wheels"
			}
			msg := fmt.Sprintf("building image %s from Debian %s (%s)", im.Ref, im.suite(), what)
			if why != "" {
				msg += ": " + why
			}
			done := p.Step("%s", msg)
			if err := buildImage(ctx, opts, bases[im.suite()], im, tars[i]); err != nil {
				errs[k] = fmt.Errorf("failed to build image %s: %w", im.Ref, err)
				return
			}
			pruneOldBuilds(opts, im, tars[i])
			done()
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return tars, nil
}

// NoRoomError is a build refused for want of free space.
type NoRoomError struct {
	Image      Image
	Dir        string
	Need, Free uint64
}

func (e *NoRoomError) Error() string {
	return fmt.Sprintf("building %s needs about %s free in %s, and %s is free: free some space (make dev-down frees the nodes' copies of the images), or build it on a machine with more disk (bin/mpijob-dev images %s)",
		e.Image.Ref, gib(e.Need), e.Dir, gib(e.Free), e.Image.Name)
}

func gib(b uint64) string { return fmt.Sprintf("%.1f GiB", float64(b)/(1<<30)) }

// roomFor refuses a build of im that needs more space than dir's file
// system has free.
func roomFor(im Image, dir string) error {
	if im.BuildSpace == 0 {
		return nil
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return fmt.Errorf("failed to read the free space in %s: %w", dir, err)
	}
	return needRoom(im, dir, st.Bavail*uint64(st.Bsize))
}

// needRoom is roomFor's decision, given what is free.
func needRoom(im Image, dir string, free uint64) error {
	if free < im.BuildSpace {
		return &NoRoomError{Image: im, Dir: dir, Need: im.BuildSpace, Free: free}
	}
	return nil
}

// pruneOldBuilds removes the earlier builds of im (tars under an older
// hash of its inputs): an image is hundreds of MB, and the disk it fills is
// the one the nodes' kubelets watch for pressure.
func pruneOldBuilds(opts Options, im Image, current string) {
	old, _ := filepath.Glob(filepath.Join(Dir(opts), im.Dir+"-*.tar"))
	for _, t := range old {
		rest := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(t), im.Dir+"-"), ".tar")
		if t != current && len(rest) == 12 && !strings.Contains(rest, "-") {
			_ = os.Remove(t)
		}
	}
}

// LockFile takes an exclusive lock on path, waiting for it, and returns
// what releases it.
func LockFile(path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("failed to lock %s: %w", path, err)
	}
	return func() { _ = f.Close() }, nil
}

// Run runs a command, its output in the error when it fails.
func Run(ctx context.Context, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive", "LC_ALL=C")
	out, err := cmd.CombinedOutput()
	if err != nil {
		tail := string(out)
		if len(tail) > 3000 {
			tail = "..." + tail[len(tail)-3000:]
		}
		return fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, tail)
	}
	return nil
}

// chroot runs a shell script inside rootfs with /proc mounted, the host's
// resolver and the host's CA bundle (in /tmp, for pip behind a TLS-inspecting
// proxy; removed after), in a clean environment: the host's SSL_CERT_FILE,
// PIP_* and the like name files that do not exist inside.
func chroot(ctx context.Context, rootfs, script string) error {
	if err := CopyFile("/etc/resolv.conf", filepath.Join(rootfs, "etc", "resolv.conf"), 0o644); err != nil {
		return err
	}
	hostCA := filepath.Join(rootfs, "tmp", "host-ca.crt")
	env := []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/root", "DEBIAN_FRONTEND=noninteractive", "LC_ALL=C", "PIP_DISABLE_PIP_VERSION_CHECK=1"}
	if err := CopyFile(CACertificates, hostCA, 0o644); err == nil {
		env = append(env, "PIP_CERT=/tmp/host-ca.crt")
		defer func() { _ = os.Remove(hostCA) }()
	}
	procDir := filepath.Join(rootfs, "proc")
	_ = os.MkdirAll(procDir, 0o755)
	if err := syscall.Mount("proc", procDir, "proc", 0, ""); err != nil {
		return fmt.Errorf("failed to mount /proc in %s: %w", rootfs, err)
	}
	defer func() { _ = Unmount(procDir) }()
	cmd := exec.CommandContext(ctx, "chroot", rootfs, "/bin/sh", "-ec", script)
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	if err != nil {
		tail := string(out)
		if len(tail) > 3000 {
			tail = "..." + tail[len(tail)-3000:]
		}
		return fmt.Errorf("in %s: %w\n%s", filepath.Base(rootfs), err, tail)
	}
	return nil
}

const aptInstall = `cat > /usr/sbin/policy-rc.d <<'X'
#!/bin/sh
exit 101
X
chmod +x /usr/sbin/policy-rc.d
apt-get update -qq
apt-get install -y -qq --no-install-recommends %s
`

const aptClean = `apt-get clean
rm -rf /var/lib/apt/lists/* /usr/sbin/policy-rc.d /var/cache/debconf/*-old /var/log/*.log /etc/resolv.conf
: > /etc/resolv.conf
`

// baseSetup runs in every image's base after its packages: the user the
// runtimes run as and sshd's run folder, without host keys (each Worker
// makes its own). The Containerfiles run the same lines.
const baseSetup = `useradd -m -u 1000 -U -s /bin/bash mpiuser
mkdir -p /run/sshd && chmod 0755 /run/sshd
rm -f /etc/ssh/ssh_host_*
`

// compileScript compiles cPrograms from /tmp with im's MPI compiler.
func (im Image) compileScript() string {
	return fmt.Sprintf("for p in %s; do %s -O2 -o /tmp/$p /tmp/$p.c; done", strings.Join(cPrograms, " "), im.MPICC)
}

func buildBase(ctx context.Context, suite, base string) error {
	tmp := base + ".tmp"
	_ = os.RemoveAll(tmp)
	if err := os.MkdirAll(filepath.Dir(base), 0o755); err != nil {
		return err
	}
	if err := Run(ctx, "debootstrap", "--variant=minbase", suite, tmp, debianMirror); err != nil {
		return err
	}
	script := fmt.Sprintf(aptInstall, strings.Join(basePackages, " ")) + "\n" + baseSetup
	if err := chroot(ctx, tmp, script); err != nil {
		return err
	}
	return os.Rename(tmp, base)
}

func buildImage(ctx context.Context, opts Options, base string, im Image, out string) error {
	work := filepath.Join(Dir(opts), "work")
	build := filepath.Join(work, im.Dir+"-build")
	root := filepath.Join(work, im.Dir)
	for _, d := range []string{build, root} {
		_ = os.RemoveAll(d)
		if err := Run(ctx, "cp", "-a", base, d); err != nil {
			return err
		}
	}
	defer func() { _ = os.RemoveAll(build); _ = os.RemoveAll(root) }()

	// Compile mpi-hello and mpi-allreduce-bench in a throw-away copy with
	// the compiler and headers.
	for _, prog := range cPrograms {
		if err := CopyFile(filepath.Join(opts.RepoRoot, "images", "common", prog+".c"), filepath.Join(build, "tmp", prog+".c"), 0o644); err != nil {
			return err
		}
	}
	script := fmt.Sprintf(aptInstall, strings.Join(append(append([]string{}, im.Packages...), im.BuildPackages...), " ")) +
		im.Setup + im.BuildSetup + im.compileScript() + "\n"
	if err := chroot(ctx, build, script); err != nil {
		return err
	}

	if wheels := filepath.Join(build, "tmp", "wheels"); fileExists(wheels) {
		if err := Run(ctx, "cp", "-a", wheels, filepath.Join(root, "tmp", "wheels")); err != nil {
			return err
		}
	}
	script = fmt.Sprintf(aptInstall, strings.Join(im.Packages, " ")) + im.Setup + im.Install + "rm -rf /tmp/wheels\n" + im.Check + stacksHook + aptClean
	if err := chroot(ctx, root, script); err != nil {
		return err
	}
	files := map[string]string{
		filepath.Join(build, "tmp", "mpi-hello"):           filepath.Join(root, "usr", "local", "bin", "mpi-hello"),
		filepath.Join(build, "tmp", "mpi-allreduce-bench"): filepath.Join(root, "usr", "local", "bin", "mpi-allreduce-bench"),
	}
	for _, f := range commonFiles {
		files[filepath.Join(opts.RepoRoot, "images", f.src)] = filepath.Join(root, f.dst)
	}
	for src, dst := range im.Files {
		files[filepath.Join(opts.RepoRoot, "images", src)] = filepath.Join(root, dst)
	}
	for src, dst := range files {
		mode := os.FileMode(0o644)
		if strings.HasPrefix(dst, filepath.Join(root, "usr", "local", "bin")) {
			mode = 0o755
		}
		if err := CopyFile(src, dst, mode); err != nil {
			return err
		}
	}
	if env := sshEnv(im.Env); env != "" {
		f, err := os.OpenFile(filepath.Join(root, "home", "mpiuser", ".sshd_config"), os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			return err
		}
		_, err = f.WriteString(env)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	}
	if err := os.Chown(filepath.Join(root, "home", "mpiuser", ".sshd_config"), 1000, 1000); err != nil {
		return err
	}
	cfg := v1.Config{
		User:       "1000",
		WorkingDir: "/home/mpiuser",
		Env:        imageEnv(im.Env),
		Cmd:        []string{"/bin/bash"},
		Labels:     map[string]string{"org.opencontainers.image.source": "mpijob images/" + im.Dir},
	}
	return WriteImage(root, filepath.Join(work, im.Dir+"-layer.tar"), im.Ref, cfg, out)
}

// sshEnv is what an image whose environment puts its own PATH first (a
// virtual environment with its MPI and Python packages) adds to its
// sshd_config: the same environment for sessions over SSH, in which
// OpenMPI's orted and Hydra's proxies start the ranks. Without it a rank's
// python3 is the system's, without the image's packages. Other images add
// nothing.
func sshEnv(env []string) string {
	if !slices.ContainsFunc(env, func(e string) bool { return strings.HasPrefix(e, "PATH=") }) {
		return ""
	}
	// sshd takes the first SetEnv line only: every variable goes on it.
	return "# The image's environment for sessions over SSH, where the ranks start.\nSetEnv " + strings.Join(env, " ") + "\n"
}

// imageEnv is an image's environment: HOME, PATH (unless env sets its own)
// and env.
func imageEnv(env []string) []string {
	out := []string{"HOME=/home/mpiuser"}
	if !slices.ContainsFunc(env, func(e string) bool { return strings.HasPrefix(e, "PATH=") }) {
		out = append(out, "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
	}
	return append(out, env...)
}

func buildPause(ctx context.Context, opts Options, out string) error {
	work := filepath.Join(Dir(opts), "work", "pause")
	_ = os.RemoveAll(work)
	if err := os.MkdirAll(work, 0o755); err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(work) }()
	if err := Run(ctx, "gcc", "-static", "-Os", "-s", "-o", filepath.Join(work, "pause"), filepath.Join(opts.RepoRoot, "images", "pause", "pause.c")); err != nil {
		return fmt.Errorf("failed to compile the pause binary (needs gcc and libc6-dev): %w", err)
	}
	cfg := v1.Config{Entrypoint: []string{"/pause"}, User: "65535:65535"}
	return WriteImage(work, work+"-layer.tar", PauseImage, cfg, out)
}

// WriteImage packs rootfs as one layer, adds cfg and writes an OCI image
// layout as a tar that `ctr images import` reads; the index annotates the
// image with ref so containerd knows it by that name.
func WriteImage(rootfs, layerPath, ref string, cfg v1.Config, out string) error {
	gz, err := writeGzLayer(rootfs, layerPath)
	defer func() { _ = os.Remove(layerPath) }()
	if err != nil {
		return err
	}
	layer, err := partial.CompressedToLayer(gz)
	if err != nil {
		return err
	}
	base := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err := mutate.AppendLayers(base, layer)
	if err != nil {
		return err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return err
	}
	cf = cf.DeepCopy()
	cf.Config = cfg
	cf.OS, cf.Architecture = "linux", "amd64"
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return err
	}
	tag, err := name.NewTag(ref)
	if err != nil {
		return err
	}
	dir := out + ".layout"
	_ = os.RemoveAll(dir)
	defer func() { _ = os.RemoveAll(dir) }()
	lp, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	if err := lp.AppendImage(img, layout.WithAnnotations(map[string]string{
		"io.containerd.image.name":          tag.Name(),
		"org.opencontainers.image.ref.name": tag.TagStr(),
	})); err != nil {
		return fmt.Errorf("failed to write image %s: %w", ref, err)
	}
	tmp := out + ".tmp"
	if err := tarDir(dir, tmp); err != nil {
		return err
	}
	return os.Rename(tmp, out)
}

// gzLayer is an image layer gzipped once, into a file, with its digest and
// diffID taken while it was written. (go-containerregistry's layer from an
// uncompressed tar gzips it twice, once for its digest and once to write
// it: for the OpenMPI image's 2.4 GB layer about 35 s of CPU, against 11 s
// for this one pass with klauspost/compress's gzip at its best speed.)
type gzLayer struct {
	path           string
	digest, diffID v1.Hash
	size           int64
}

func (l *gzLayer) Digest() (v1.Hash, error)            { return l.digest, nil }
func (l *gzLayer) DiffID() (v1.Hash, error)            { return l.diffID, nil }
func (l *gzLayer) Size() (int64, error)                { return l.size, nil }
func (l *gzLayer) MediaType() (types.MediaType, error) { return types.OCILayer, nil }
func (l *gzLayer) Compressed() (io.ReadCloser, error)  { return os.Open(l.path) }

// countingWriter counts what passes through it.
type countingWriter struct{ n int64 }

func (c *countingWriter) Write(p []byte) (int, error) { c.n += int64(len(p)); return len(p), nil }

// writeGzLayer packs rootfs (as tarDir does) into a gzipped layer at path.
func writeGzLayer(rootfs, path string) (*gzLayer, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	fw := bufio.NewWriterSize(f, 1<<20)
	compressed, size := sha256.New(), &countingWriter{}
	zw, err := gzip.NewWriterLevel(io.MultiWriter(fw, compressed, size), gzip.BestSpeed)
	if err != nil {
		return nil, err
	}
	uncompressed := sha256.New()
	tw := bufio.NewWriterSize(io.MultiWriter(zw, uncompressed), 1<<20)
	if err := writeTar(rootfs, tw); err != nil {
		return nil, err
	}
	if err := tw.Flush(); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	if err := fw.Flush(); err != nil {
		return nil, err
	}
	if err := f.Close(); err != nil {
		return nil, err
	}
	return &gzLayer{
		path:   path,
		digest: v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(compressed.Sum(nil))},
		diffID: v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(uncompressed.Sum(nil))},
		size:   size.n,
	}, nil
}

// tarDir writes rootfs as an uncompressed tar file (writeTar).
func tarDir(rootfs, out string) error {
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	if err := writeTar(rootfs, f); err != nil {
		return err
	}
	return f.Close()
}

// writeTar writes rootfs as an uncompressed tar to w, keeping owners and
// modes and leaving out the contents of /proc, /sys and /dev, which the
// runtime provides. It also packs an OCI layout folder (which has none of
// those).
func writeTar(rootfs string, w io.Writer) error {
	tw := tar.NewWriter(w)
	err := filepath.WalkDir(rootfs, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(rootfs, path)
		if rel == "." {
			return nil
		}
		for _, skip := range []string{"proc/", "sys/", "dev/"} {
			if strings.HasPrefix(rel, skip) {
				if d.IsDir() {
					return fs.SkipDir
				}
				return nil
			}
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		link := ""
		if info.Mode()&os.ModeSymlink != 0 {
			if link, err = os.Readlink(path); err != nil {
				return err
			}
		}
		if !info.Mode().IsRegular() && !info.IsDir() && info.Mode()&os.ModeSymlink == 0 {
			return nil // sockets, fifos, devices
		}
		hdr, err := tar.FileInfoHeader(info, link)
		if err != nil {
			return err
		}
		hdr.Name = rel
		if info.IsDir() {
			hdr.Name += "/"
		}
		if st, ok := info.Sys().(*syscall.Stat_t); ok {
			hdr.Uid, hdr.Gid = int(st.Uid), int(st.Gid)
		}
		hdr.Uname, hdr.Gname = "", ""
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if info.Mode().IsRegular() {
			src, err := os.Open(path)
			if err != nil {
				return err
			}
			_, err = io.Copy(tw, src)
			_ = src.Close()
			return err
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("failed to pack %s: %w", rootfs, err)
	}
	return tw.Close()
}

// CopyFile copies a file with its mode.
func CopyFile(src, dst string, mode os.FileMode) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	_ = os.Remove(dst)
	return os.WriteFile(dst, b, mode)
}

// TarRefs maps each image tar, built or not, to its image name.
func TarRefs(opts Options) (map[string]string, error) {
	pause, err := pauseTar(opts)
	if err != nil {
		return nil, err
	}
	refs := map[string]string{pause: PauseImage}
	for _, im := range Images {
		t, err := im.Tar(opts)
		if err != nil {
			return nil, err
		}
		refs[t] = im.Ref
	}
	return refs, nil
}

// UserImage is the local cluster's stand-in for a user's own image: the
// OpenMPI image under another name, on every real node.
const UserImage = "localhost/mpijob/user-train:1"

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// PauseImage is the nodes' pause image: an image without sshd or a
// shell, built from Kubernetes' own pause binary.
const PauseImage = "registry.k8s.io/pause:3.10.1"

// CACertificates is Debian's bundle (package ca-certificates), copied into
// the images that talk TLS.
const CACertificates = "/etc/ssl/certs/ca-certificates.crt"

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
