package kafka

import "testing"

func TestParseTransactionalID(t *testing.T) {
	for _, c := range []struct {
		id, prefix string
		subtask    int
		n          int64
		ok         bool
	}{
		{"job-3-17", "job", 3, 17, true},
		{"my-job-0-1", "my-job", 0, 1, true},
		{"job-1-3-5", "job", 0, 0, false},  // prefix "job-1"
		{"job-1-3-5", "job-1", 3, 5, true}, // ...is this one's
		{"job-3", "job", 0, 0, false},      // no number
		{"jobs-3-17", "job", 0, 0, false},  // another prefix
		{"job-x-17", "job", 0, 0, false},   // not a subtask
		{"job--3-17", "job", 0, 0, false},  // not digits
		{"job-3-17a", "job", 0, 0, false},  // not digits
		{TransactionalID("p", 2, 9), "p", 2, 9, true},
	} {
		s, n, ok := parseTransactionalID(c.id, c.prefix)
		if ok != c.ok || ok && (s != c.subtask || n != c.n) {
			t.Errorf("parseTransactionalID(%q, %q) = %d, %d, %v", c.id, c.prefix, s, n, ok)
		}
	}
}

func TestParseSplit(t *testing.T) {
	for id, want := range map[string]topicPartition{"events-0": {"events", 0}, "a-b-12": {"a-b", 12}} {
		if got, err := parseSplit(id); err != nil || got != want {
			t.Errorf("parseSplit(%q) = %v, %v", id, got, err)
		}
		if got := SplitID(want.topic, want.partition); got != id {
			t.Errorf("SplitID(%v) = %q", want, got)
		}
	}
	for _, id := range []string{"events", "-3", "events-", "events-x", "events-+1"} {
		if _, err := parseSplit(id); err == nil {
			t.Errorf("parseSplit(%q) succeeded", id)
		}
	}
}
