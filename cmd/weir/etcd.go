package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/weirstream/weir/internal/ha"
)

// newEtcdCmd returns the etcd command: a one-member etcd server in this
// process, for high availability on one machine.
func newEtcdCmd() *cobra.Command {
	var dir, listen, peer string
	cmd := &cobra.Command{
		Use:   "etcd",
		Short: "Run a one-member etcd server for trying high availability on one machine",
		Long: `etcd runs a single-member etcd server (go.etcd.io/etcd/server/v3/embed) in this
process, keeping its data in --data-dir, for job managers started with
-D high-availability.type=etcd -D high-availability.etcd.endpoints=ADDR.
It is for one machine and for trying things out: a production cluster runs
etcd itself, with three or five members, and points
high-availability.etcd.endpoints at them.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := os.MkdirAll(dir, 0o700); err != nil {
				return err
			}
			s, err := ha.StartServer(dir, listen, peer)
			if err != nil {
				return err
			}
			defer s.Close()
			fmt.Fprintf(cmd.ErrOrStderr(), "%s: etcd serving clients on %s (data in %s); use -D high-availability.etcd.endpoints=%s\n",
				cmd.Root().Name(), s.Endpoint, dir, s.Endpoint)
			select {
			case <-cmd.Context().Done():
				return nil
			case err := <-s.Err():
				return err
			}
		},
	}
	cmd.Flags().StringVar(&dir, "data-dir", "weir-etcd", "directory of etcd's data")
	cmd.Flags().StringVar(&listen, "listen", "127.0.0.1:2379", "address clients reach etcd at (port 0: a free one)")
	cmd.Flags().StringVar(&peer, "peer-listen", "127.0.0.1:2380", "address of etcd's peer port, unused with one member (port 0: a free one)")
	return cmd
}
