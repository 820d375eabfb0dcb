// Command weir is weir's command-line entry point: every role and tool of
// the stream processor is a subcommand of one binary. It is a program
// built with weir.Command, as a user's is, that carries GatewayMeter and
// adds weir's own tools.
package main

import (
	"fmt"
	"os"
	"runtime/pprof"

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
	addCPUProfile(root)
	return root
}

// addCPUProfile gives every command of root a --cpuprofile flag that
// writes a CPU profile of the command's run (for go tool pprof).
func addCPUProfile(root *cobra.Command) {
	var path string
	var f *os.File
	root.PersistentFlags().StringVar(&path, "cpuprofile", "", "write a CPU profile of the command to this file")
	root.PersistentPreRunE = func(*cobra.Command, []string) error {
		if path == "" {
			return nil
		}
		var err error
		if f, err = os.Create(path); err != nil {
			return fmt.Errorf("--cpuprofile: %w", err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			_ = f.Close()
			f = nil
			return fmt.Errorf("--cpuprofile: %w", err)
		}
		return nil
	}
	root.PersistentPostRunE = func(*cobra.Command, []string) error {
		if f == nil {
			return nil
		}
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			return fmt.Errorf("--cpuprofile: %w", err)
		}
		return nil
	}
}
