package kafka_test

import (
	"fmt"
	"testing"

	"github.com/weirstream/weir/internal/kafkatest"
)

// The tests below run the transactional scenarios and the job against a
// real Kafka broker, when WEIR_KAFKA_BROKERS names one (see package
// kafkatest); otherwise they are skipped.

func TestKafkaExactlyOnceSinkThroughFailures(t *testing.T) {
	brokers := kafkatest.Brokers(t)
	for _, restore := range []int64{1, 2} {
		for _, closed := range []bool{false, true} {
			t.Run(fmt.Sprintf("restore=%d/closed=%v", restore, closed), func(t *testing.T) {
				throughFailures(t, brokers, kafkatest.CreateTopic(t, 3), kafkatest.UniqueName(t, "txn"), restore, closed)
			})
		}
	}
}

func TestKafkaExactlyOnceSinkRescale(t *testing.T) {
	brokers := kafkatest.Brokers(t)
	rescale(t, brokers, kafkatest.CreateTopic(t, 2), kafkatest.UniqueName(t, "txn"))
}

func TestKafkaJobExactlyOnce(t *testing.T) {
	brokers := kafkatest.Brokers(t)
	balancesJob(t, brokers, kafkatest.CreateTopic(t, 4), kafkatest.CreateTopic(t, 4), kafkatest.UniqueName(t, "job"), balancesRun{})
}
