// Package localcluster builds and runs a real single-machine Kubernetes
// cluster for development and tests: etcd, kube-apiserver, kube-scheduler,
// kube-controller-manager, CoreDNS, two real nodes (kubelet + containerd
// running real containers), kwok nodes for scale, and the upstream Kubeflow
// Trainer V2 and JobSet controllers.
//
// Every binary is built from a pinned Go module (hack/toolchain/*) into a
// git-ignored cache and rebuilt only when its pins change. The cluster's
// processes run on the host; their state lives under .local/ in the
// repository so that Down can remove every process, mount, link, cgroup and
// /etc/hosts line it made.
package localcluster
