// Package framework gives integration and e2e tests the shared local
// cluster: clients for the admin and every development user, throw-away
// namespaces, fluent TrainJob builders and waits.
//
// Tests build with the e2e tag and find the cluster through
// MPIJOB_KUBECONFIG, or the local cluster's .local/kubeconfig. `make
// test-e2e` starts the local cluster once for all test packages.
package framework
