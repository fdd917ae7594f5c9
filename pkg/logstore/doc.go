// Package logstore keeps MPI jobs' logs after their pods are gone: a
// collector that reads the kubelets' pod logs (CRI files under
// /var/log/pods) and pushes them to Grafana Loki as OpenShift Logging 6
// stores them (Vector's stream labels, each line a ViaQ JSON record), so
// a LokiStack is read alike; a Loki client; and the read API that mpijob-manager serves as an aggregated
// API (logs.mpijob.dev/v1alpha1, trainjobs/log), through which `kubectl
// mpijob logs`, the SDK and the dashboard read the store as the user.
//
// Isolation: every namespace is its own Loki tenant (X-Scope-OrgID; a
// LokiStack's one tenant, with every query naming the namespace), the
// store is reached only with the store's token, and the read API answers a
// user only after a SubjectAccessReview for `get pods/log` in the job's
// namespace, so a tenant reads no other tenant's logs.
package logstore
