package main

import (
	"flag"
	"testing"
)

// The dashboard's flags are its own: a package it imports that registers
// flags of the same name at init (controller-runtime's --kubeconfig, which
// the manager's controllers bring) panics the binary before it starts, as
// it once did in the cluster. A test of this package runs that init.
func TestFlagsAreTheDashboards(t *testing.T) {
	for _, name := range []string{"kubeconfig", "listen"} {
		if flag.Lookup(name) != nil {
			t.Errorf("flag --%s is registered at init by an imported package, before the dashboard defines its own", name)
		}
	}
}
