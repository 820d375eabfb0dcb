package clustercli

import (
	"testing"

	"github.com/weirstream/weir/internal/ops"
)

// TestDecodeSplits: a source's state decodes with or without the
// readers' split state; other operator state does not.
func TestDecodeSplits(t *testing.T) {
	for _, c := range []struct {
		state string
		ok    bool
	}{
		{`{"t-0":{"offset":7}}`, true},
		{`{"t-0":{"offset":7,"ended":true,"state":"eyJlbmQiOjcwMH0="}}`, true},
		{`{"t-0":{"offset":7,"max_ts":1700000000000}}`, true},
		{`{"t-0":{"offset":7,"other":1}}`, false},
		{`{"t-0":{"ended":true}}`, false},
		{`[1,2]`, false},
	} {
		if _, ok := ops.DecodeSourceState([]byte(c.state)); ok != c.ok {
			t.Errorf("DecodeSourceState(%s): %v, want %v", c.state, ok, c.ok)
		}
	}
}
