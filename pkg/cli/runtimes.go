package cli

import (
	"github.com/spf13/cobra"
)

// newRuntimesCommand groups the runtime verbs: list, describe and test,
// one file and one Options type each.
func newRuntimesCommand(o *Options) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "runtimes",
		Short: "List, describe and test the MPI runtimes",
	}
	cmd.AddCommand(newRuntimesListCommand(o), newRuntimesDescribeCommand(o), newRuntimesTestCommand(o))
	return cmd
}
