package cluster_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/weirstream/weir/internal/cluster"
	"github.com/weirstream/weir/stream"
)

// BenchmarkDataPlane runs a keyed running sum (4 source partitions,
// parallelism 4, keyBy between source and sum, a discarding sink) as one
// process and on two
// task managers, whose channels then cross TCP on loopback through netio,
// and reports records per second. The task managers share the benchmark's
// OS process but nothing else: every record between them is encoded,
// framed and sent over a socket.
func BenchmarkDataPlane(b *testing.B) {
	const count = 500_000 // per partition
	for _, mode := range []string{"embedded", "two-task-managers"} {
		b.Run(mode, func(b *testing.B) {
			var total time.Duration
			for i := 0; b.Loop(); i++ {
				jobs := &sumJobs{discard: true, cfg: []string{"parallelism.default=4"}}
				args, _ := json.Marshal(sumArgs{Count: count})
				sub := cluster.Submission{JobID: fmt.Sprintf("bench-%d", i), Job: "sum", Args: args}
				if mode == "embedded" {
					env, err := jobs.env(sub)
					if err != nil {
						b.Fatal(err)
					}
					start := time.Now()
					if err := env.Execute(context.Background(), "sum"); err != nil {
						b.Fatal(err)
					}
					total += time.Since(start)
				} else {
					total += runOnCluster(b, jobs.jobs(func(stream.JobEvent) {}), sub)
				}
			}
			b.ReportMetric(float64(count*partitions*b.N)/total.Seconds(), "records/s")
		})
	}
}

func runOnCluster(b *testing.B, jobs cluster.Jobs, sub cluster.Submission) time.Duration {
	b.StopTimer()
	_, addr := startJobManager(b, jobs)
	for i := range 2 {
		startTaskManager(b, fmt.Sprintf("tm-%d", i), addr, 2, jobs)
	}
	c, err := cluster.Dial(addr)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	waitTaskManagers(b, c, 2)
	b.StartTimer()
	start := time.Now()
	id, err := c.Submit(context.Background(), sub)
	if err != nil {
		b.Fatal(err)
	}
	for {
		ov, err := c.List(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		for _, j := range ov.Jobs {
			if j.JobID == id && j.Ended() {
				if j.State != "FINISHED" {
					b.Fatalf("job %s: %s", j.State, j.Error)
				}
				return time.Since(start)
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
}
