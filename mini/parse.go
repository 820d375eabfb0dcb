package mini

import (
	"fmt"
	"strconv"
	"strings"
)

// ParseElement parses an element as scenario files write it:
//
//	k=x v=3 ts=5     an Event (ts may be omitted: 0)
//	barrier=7        a Barrier
//	watermark=100    a Watermark
//	end              EndOfInput
func ParseElement(fields []string) (Element, error) {
	if len(fields) == 1 && fields[0] == "end" {
		return EndOfInput{}, nil
	}
	kv := make(map[string]string, len(fields))
	for _, f := range fields {
		k, v, ok := strings.Cut(f, "=")
		if !ok {
			return nil, fmt.Errorf("mini: element field %q is not key=value", f)
		}
		kv[k] = v
	}
	num := func(k string) (int64, error) {
		n, err := strconv.ParseInt(kv[k], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("mini: element field %s: %w", k, err)
		}
		return n, nil
	}
	switch {
	case len(kv) == 1 && kv["barrier"] != "":
		id, err := num("barrier")
		return Barrier{ID: id}, err
	case len(kv) == 1 && kv["watermark"] != "":
		ts, err := num("watermark")
		return Watermark{Timestamp: ts}, err
	case kv["k"] != "" && kv["v"] != "":
		e := Event{Key: kv["k"]}
		var err error
		if e.Value, err = num("v"); err != nil {
			return nil, err
		}
		if _, ok := kv["ts"]; ok {
			if e.Timestamp, err = num("ts"); err != nil {
				return nil, err
			}
		}
		if len(kv) > 3 || (len(kv) == 3 && kv["ts"] == "") {
			return nil, fmt.Errorf("mini: unknown event field in %v", fields)
		}
		return e, nil
	}
	return nil, fmt.Errorf("mini: cannot parse element %q: want k=K v=V [ts=T], barrier=N, watermark=T or end", strings.Join(fields, " "))
}
