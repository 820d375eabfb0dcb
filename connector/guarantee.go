package connector

import "fmt"

// DeliveryGuarantee is the guarantee a sink gives for the records it writes,
// as Flink's DeliveryGuarantee. Sinks take it as an option; its value is
// Flink's spelling of the sink.delivery-guarantee option.
//
// The default policy, the same for every sink: a sink that is given no
// guarantee (or the zero value) gives the strongest one it can without
// further configuration. The file sink's default is therefore ExactlyOnce;
// the Kafka sink's is AtLeastOnce, since exactly-once needs a transactional
// id prefix. Neither defaults to None, which may lose records.
type DeliveryGuarantee string

// Delivery guarantees.
const (
	// ExactlyOnce makes each record's effect visible once, by committing
	// what a subtask wrote since the previous checkpoint when the
	// checkpoint completes; records replayed after a restore replace those
	// that were never committed. It needs a job that checkpoints in
	// EXACTLY_ONCE mode to be exact end to end.
	ExactlyOnce DeliveryGuarantee = "exactly-once"
	// AtLeastOnce makes everything written before a completed checkpoint
	// durable at that checkpoint; records replayed after a restore are
	// written again.
	AtLeastOnce DeliveryGuarantee = "at-least-once"
	// None waits for nothing at checkpoints: records may be lost or
	// duplicated on failures.
	None DeliveryGuarantee = "none"
)

// ParseDeliveryGuarantee parses Flink's names for delivery guarantees,
// "none", "at-least-once" and "exactly-once" (or NONE, AT_LEAST_ONCE,
// EXACTLY_ONCE).
func ParseDeliveryGuarantee(s string) (DeliveryGuarantee, error) {
	switch s {
	case "none", "NONE":
		return None, nil
	case "at-least-once", "AT_LEAST_ONCE":
		return AtLeastOnce, nil
	case "exactly-once", "EXACTLY_ONCE":
		return ExactlyOnce, nil
	}
	return "", fmt.Errorf("unknown delivery guarantee %q (want none, at-least-once or exactly-once)", s)
}
