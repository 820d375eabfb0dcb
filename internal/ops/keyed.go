package ops

import (
	"bytes"
	"fmt"
	"time"

	"github.com/weirstream/weir/codec"
	"github.com/weirstream/weir/internal/runtime"
	"github.com/weirstream/weir/state"
)

// TimeDomain says which clock a timer follows.
type TimeDomain uint8

const (
	EventTime TimeDomain = iota
	ProcessingTime
)

func (d TimeDomain) String() string {
	if d == ProcessingTime {
		return "processing-time"
	}
	return "event-time"
}

// Keyed is what every keyed operator shares: the keyed state backend of the
// subtask's key groups, restored from the checkpoint when recovering, and
// event-time and processing-time timers kept with it (so they are
// checkpointed per key group too). N is the timers' namespace type:
// state.VoidNamespace for process functions, the window for windows.
type Keyed[K, N comparable] struct {
	KeyCodec codec.Codec[K]
	Hasher   func(K) uint32
	NSCodec  codec.Codec[N]
	// OnTimer is called for every timer that fires, with its key as the
	// backend's current key.
	OnTimer func(t state.Timer[K, N], d TimeDomain) error

	Ctx     *runtime.OperatorContext
	Backend *state.KeyedBackend[K]
	event   *state.Timers[K, N]
	proc    *state.Timers[K, N]

	watermark   int64
	procWakeup  int64 // processing time the next wake-up is scheduled for
	procPending bool
}

// Open creates the backend and restores it.
func (k *Keyed[K, N]) Open(ctx *runtime.OperatorContext) error {
	k.Ctx = ctx
	// Records at or before the restored event time are as late as they
	// were before the failure.
	k.watermark = ctx.Watermark
	kgs := ctx.KeyGroups
	opts := []state.BackendOption{state.WithKeyHasher(k.Hasher)}
	if ks := ctx.KeyedState; ks.Backend.EmbeddedLSM() {
		opts = append(opts, state.WithPebble(state.PebbleOptions{Dir: ks.Dir, Memory: ks.Memory}))
	}
	b, err := state.NewKeyedBackend(k.KeyCodec, ctx.MaxParallelism, kgs, opts...)
	if err != nil {
		return err
	}
	k.Backend = b
	if ctx.Restored != nil {
		for _, h := range ctx.Restored.KeyedHandles(ctx.KeyGroups) {
			data, err := ctx.Restored.Store.ReadState(ctx, h)
			if err != nil {
				return fmt.Errorf("reading keyed state of checkpoint %d: %w", ctx.Restored.CheckpointID, err)
			}
			if err := b.RestoreKeyGroups(bytes.NewReader(data), kgs); err != nil {
				return fmt.Errorf("restoring keyed state of checkpoint %d: %w", ctx.Restored.CheckpointID, err)
			}
		}
	}
	if k.event, err = state.NewTimers(b, "_timers_event", k.NSCodec); err != nil {
		return err
	}
	if k.proc, err = state.NewTimers(b, "_timers_processing", k.NSCodec); err != nil {
		return err
	}
	k.scheduleProcessing()
	return nil
}

// Close releases the backend: the embedded LSM store's database and
// working directory.
func (k *Keyed[K, N]) Close() error {
	if k.Backend == nil {
		return nil
	}
	return k.Backend.Close()
}

// SetKey makes k the current key.
func (k *Keyed[K, N]) SetKey(key K) { k.Backend.SetCurrentKeyWithHash(key, k.Hasher(key)) }

// Watermark returns the operator's current event time.
func (k *Keyed[K, N]) Watermark() int64 { return k.watermark }

// RegisterEventTimer adds an event-time timer for the current key.
func (k *Keyed[K, N]) RegisterEventTimer(ns N, ts int64) { k.event.Register(ns, ts) }

// DeleteEventTimer removes an event-time timer of the current key.
func (k *Keyed[K, N]) DeleteEventTimer(ns N, ts int64) { k.event.Delete(ns, ts) }

// RegisterProcessingTimer adds a processing-time timer (Unix ms) for the
// current key.
func (k *Keyed[K, N]) RegisterProcessingTimer(ns N, ts int64) {
	k.proc.Register(ns, ts)
	if !k.procPending || ts < k.procWakeup {
		k.scheduleProcessing()
	}
}

// DeleteProcessingTimer removes a processing-time timer of the current key.
func (k *Keyed[K, N]) DeleteProcessingTimer(ns N, ts int64) { k.proc.Delete(ns, ts) }

// AdvanceWatermark fires the event-time timers up to wm.
func (k *Keyed[K, N]) AdvanceWatermark(wm int64) error {
	k.watermark = wm
	for {
		t, ok := k.event.Pop(wm)
		if !ok {
			return nil
		}
		if err := k.OnTimer(t, EventTime); err != nil {
			return err
		}
	}
}

func (k *Keyed[K, N]) scheduleProcessing() {
	t, ok := k.proc.Peek()
	if !ok {
		return
	}
	k.procPending, k.procWakeup = true, t.Timestamp
	k.Ctx.AtProcessingTime(time.UnixMilli(t.Timestamp), func() error {
		if k.procWakeup != t.Timestamp {
			return nil // superseded by an earlier wake-up
		}
		k.procPending = false
		now := k.Ctx.Now().UnixMilli()
		for {
			tm, ok := k.proc.Pop(now)
			if !ok {
				break
			}
			if err := k.OnTimer(tm, ProcessingTime); err != nil {
				return err
			}
		}
		k.scheduleProcessing()
		return nil
	})
}

// Snapshot takes the backend's copy-on-write snapshot.
func (k *Keyed[K, N]) Snapshot(id int64) (runtime.Snapshot, error) {
	s := k.Backend.Snapshot(id)
	kg := s.KeyGroups()
	return runtime.Snapshot{Keyed: s, KeyGroups: kg, Release: s.Release}, nil
}
