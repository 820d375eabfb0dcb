package connector_test

import (
	"testing"

	"github.com/weirstream/weir/connector"
)

func TestParseDeliveryGuarantee(t *testing.T) {
	for s, want := range map[string]connector.DeliveryGuarantee{
		"none": connector.None, "NONE": connector.None,
		"at-least-once": connector.AtLeastOnce, "AT_LEAST_ONCE": connector.AtLeastOnce,
		"exactly-once": connector.ExactlyOnce, "EXACTLY_ONCE": connector.ExactlyOnce,
	} {
		if g, err := connector.ParseDeliveryGuarantee(s); err != nil || g != want {
			t.Errorf("ParseDeliveryGuarantee(%q) = %v, %v, want %v", s, g, err, want)
		}
	}
	if _, err := connector.ParseDeliveryGuarantee("exactly_once"); err == nil {
		t.Error("ParseDeliveryGuarantee accepted exactly_once")
	}
}
