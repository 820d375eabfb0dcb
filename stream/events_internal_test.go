package stream

import (
	"testing"

	"github.com/weirstream/weir/internal/runtime"
)

// TestEventKindsMatchTheRuntime: jobEvent converts kinds by value.
func TestEventKindsMatchTheRuntime(t *testing.T) {
	for rk, k := range map[runtime.EventKind]EventKind{
		runtime.EventRunning: EventRunning, runtime.EventCheckpointCompleted: EventCheckpointCompleted,
		runtime.EventCheckpointFailed: EventCheckpointFailed, runtime.EventTaskFailed: EventTaskFailed,
		runtime.EventRestarting: EventRestarting, runtime.EventRestored: EventRestored,
		runtime.EventFinished: EventFinished, runtime.EventFailed: EventFailed,
	} {
		if jobEvent(runtime.Event{Kind: rk}).Kind != k {
			t.Errorf("runtime kind %d converts to %v, want %v", rk, jobEvent(runtime.Event{Kind: rk}).Kind, k)
		}
	}
	if EventFailed.String() != "FAILED" || EventKind(99).String() != "EventKind(99)" {
		t.Errorf("String: %v, %v", EventFailed, EventKind(99))
	}
}
