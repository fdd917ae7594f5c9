package toolchain

// Pinned versions of the engine the local cluster runs. The authoritative
// pins are the go.mod files under hack/toolchain; these constants label the
// binaries and must agree with them (TestPinsMatchToolchain checks).
const (
	KubernetesVersion = "v1.36.3"
	EtcdVersion       = "v3.6.16"
	KwokVersion       = "v0.8.0"
	CoreDNSVersion    = "v1.15.0"
	TrainerVersion    = "v2.3.0"
	JobSetVersion     = "v0.12.0"
	KueueVersion      = "v0.19.2"
	// PrometheusModuleVersion is github.com/prometheus/prometheus's module
	// version; module v0.3MM.P is Prometheus release PrometheusVersion 3.MM.P.
	PrometheusModuleVersion = "v0.315.0"
	PrometheusVersion       = "3.15.0"
	// VersityGWVersion is the S3-compatible object store (versitygw, a
	// gateway that keeps objects in a POSIX directory).
	VersityGWVersion = "v1.8.0"
	// ModelRegistryVersion is the Kubeflow Model Registry server, the
	// model registry (hack/toolchain/model-registry/pins).
	ModelRegistryVersion = "v0.3.14"
	// LokiVersion is Grafana Loki, the log store.
	LokiVersion = "3.7.8"
)
