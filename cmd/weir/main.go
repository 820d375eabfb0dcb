// Command weir is weir's command-line entry point: every role and tool of
// the stream processor is a subcommand of one binary.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/weirstream/weir/internal/clustercli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := newRootCmd().ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "weir:", err)
		os.Exit(1)
	}
}

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "weir",
		Short:         "weir is a stateful stream processor with exactly-once checkpoints",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newDemoCmd(), newBenchCmd(), newRunCmd(), newGenCmd(), newVerifyCmd(), newCheckpointsCmd(),
		clustercli.JobManagerCommand(newBinaryJobs), clustercli.TaskManagerCommand(newBinaryJobs),
		clustercli.ListCommand(), clustercli.CancelCommand())
	return root
}
