// Package logstore keeps MPI jobs' logs after their pods are gone: a
// collector that reads the kubelets' pod logs (CRI files under
// /var/log/pods) and pushes them to Grafana Loki with job, role, index,
// pod and node labels and each line's rank as structured metadata; a Loki
// client; and the read API that mpijob-manager serves as an aggregated
// API (logs.mpijob.dev/v1alpha1, trainjobs/log), through which `kubectl
// mpijob logs`, the SDK and the dashboard read the store as the user.
//
// Isolation: every namespace is its own Loki tenant (X-Scope-OrgID), the
// store is reached only with the store's token, and the read API answers a
// user only after a SubjectAccessReview for `get pods/log` in the job's
// namespace, so a tenant reads no other tenant's logs.
package logstore
