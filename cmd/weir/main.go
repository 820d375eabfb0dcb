// Command weir is weir's command-line entry point: every role and tool of
// the stream processor is a subcommand of one binary. It is a program
// built with weir.Command, as a user's is, that carries GatewayMeter and
// adds weir's own tools.
package main

import (
	"github.com/spf13/cobra"

	"github.com/weirstream/weir"
)

func main() { weir.Execute(newRootCmd()) }

// newRootCmd returns weir's command line: run (with the gatewaymeter
// job), jobmanager, taskmanager, list and cancel from weir.Command, and
// the tools demo, bench, gen, verify and checkpoints.
func newRootCmd() *cobra.Command {
	root := weir.Command("weir", gatewayMeterJob())
	root.Short = "weir is a stateful stream processor with exactly-once checkpoints"
	root.AddCommand(newDemoCmd(), newBenchCmd(), newGenCmd(), newVerifyCmd(), newCheckpointsCmd(), newEtcdCmd())
	return root
}
