// Package integration holds tests of mpijob's own components (the
// mpijob-manager's admission, diagnosis, NetworkPolicy and metrics) against
// the real local cluster. They build with the e2e tag and share the cluster
// through test/framework.
package integration
