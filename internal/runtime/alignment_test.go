package runtime

import (
	"strings"
	"testing"
	"time"

	"github.com/weirstream/weir/internal/checkpoint"
)

func TestWatermarkAlignmentValidate(t *testing.T) {
	for _, c := range []struct {
		a    WatermarkAlignment
		want string
	}{
		{WatermarkAlignment{Group: "g", MaxDrift: time.Second, UpdateInterval: time.Second}, ""},
		{WatermarkAlignment{MaxDrift: time.Second, UpdateInterval: time.Second}, "the group is empty"},
		{WatermarkAlignment{Group: "g", UpdateInterval: time.Second}, "maximal drift 0s is not positive"},
		{WatermarkAlignment{Group: "g", MaxDrift: time.Second, UpdateInterval: -time.Second}, "update interval -1s is not positive"},
	} {
		err := c.a.Validate()
		if c.want == "" {
			if err != nil {
				t.Errorf("%+v: %v", c.a, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: error %v, want one saying %q", c.a, err, c.want)
		}
	}
}

// TestWatermarkAlignerGroups: groups are apart, and the sources of one
// group must agree on its drift.
func TestWatermarkAlignerGroups(t *testing.T) {
	a := NewWatermarkAligner()
	x0, x1 := checkpoint.TaskID{Vertex: "x", Subtask: 0}, checkpoint.TaskID{Vertex: "x", Subtask: 1}
	y0 := checkpoint.TaskID{Vertex: "y", Subtask: 0}
	z0 := checkpoint.TaskID{Vertex: "z", Subtask: 0}
	if err := a.Join("g", time.Second, x0, x1); err != nil {
		t.Fatal(err)
	}
	if err := a.Join("h", time.Minute, y0); err != nil {
		t.Fatal(err)
	}
	if err := a.Join("g", time.Minute, z0); err == nil || !strings.Contains(err.Error(), `group "g"`) {
		t.Fatalf("joining g with another drift: %v, want an error naming the group", err)
	}
	if max, ok := a.Report(y0, 5); !ok || max != 5+60_000 {
		t.Fatalf("h after y0's report: %d %v, want %d", max, ok, 5+60_000)
	}
	if _, ok := a.Report(x0, 7); ok {
		t.Fatal("g's maximum known before x1 reported")
	}
	if max, ok := a.Report(x1, 3); !ok || max != 1003 {
		t.Fatalf("g: %d %v, want 1003", max, ok)
	}
	if _, ok := a.Report(checkpoint.TaskID{Vertex: "w"}, 1); ok {
		t.Fatal("a report of no member gave a maximum")
	}
	if got := a.Group(x1); len(got) != 2 || got[0] != x0 || got[1] != x1 {
		t.Fatalf("Group(x1) = %v", got)
	}
	a.Remove(x0)
	if _, ok := a.Report(x1, 4); ok {
		t.Fatal("g's maximum known after x0 was removed and before it reported again")
	}
}
