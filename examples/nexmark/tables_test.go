package nexmark_test

import (
	"slices"
	"strings"
	"testing"

	nx "github.com/weirstream/weir/examples/nexmark"
)

// TestEveryQueryHasATable: each query of the suite has its sink table
// and its rows as lines, so --vs-flink can compare every one.
func TestEveryQueryHasATable(t *testing.T) {
	for _, q := range nx.Queries() {
		tb, err := nx.TableOf(q.Name)
		if err != nil {
			t.Errorf("%s: %v", q.Name, err)
			continue
		}
		if len(tb.Columns) == 0 {
			t.Errorf("%s: a table without columns", q.Name)
		}
		if tb.Comparable != (q.Name != "q12") {
			t.Errorf("%s: Comparable %v", q.Name, tb.Comparable)
		}
	}
	if _, err := nx.TableOf("q6"); err == nil {
		t.Error("TableOf(q6) did not fail")
	}
}

// TestChangelogRows applies a Debezium changelog: inserts, retractions
// and updates, with the JSON format's spellings of decimals and
// timestamps, to its final rows.
func TestChangelogRows(t *testing.T) {
	tb := nx.Table{Columns: []nx.Column{{Name: "id", Kind: nx.BigInt}, {Name: "price", Kind: nx.Decimal3},
		{Name: "ts", Kind: nx.Timestamp}, {Name: "s", Kind: nx.Varchar}}, Updating: true}
	log := strings.Join([]string{
		`{"before":null,"after":{"id":1,"price":90.8,"ts":"2026-01-01 00:00:00","s":"a"},"op":"c"}`,
		`{"before":null,"after":{"id":2,"price":9.08E+1,"ts":"2026-01-01 00:00:00.5","s":null},"op":"c"}`,
		`{"before":{"id":1,"price":90.8,"ts":"2026-01-01 00:00:00","s":"a"},"after":null,"op":"d"}`,
		`{"before":null,"after":{"id":1,"price":"0.001","ts":"2026-01-01T00:00:01.123","s":"b\tc"},"op":"c"}`,
		``,
		`{"before":{"id":2,"price":90.800,"ts":"2026-01-01 00:00:00.500","s":null},"after":{"id":2,"price":1,"ts":"2026-01-01 00:00:02","s":""},"op":"u"}`,
	}, "\n")
	got, err := nx.ChangelogRows(tb, []byte(log))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"1\t0.001\t2026-01-01 00:00:01.123\t\"b\\tc\"",
		"2\t1.000\t2026-01-01 00:00:02.000\t\"\"",
	}
	if !slices.Equal(got, want) {
		t.Errorf("got\n%q\nwant\n%q", got, want)
	}
	for _, bad := range []string{
		`{"before":{"id":1,"price":1,"ts":"2026-01-01 00:00:00","s":"a"},"after":null,"op":"d"}`, // retracts what is not there
		`{"before":null,"after":{"id":1,"price":0.0001,"ts":"2026-01-01 00:00:00","s":"a"},"op":"c"}`,
		`{"before":null,"after":{"id":1,"price":1,"s":"a"},"op":"c"}`,
		`{"before":null,"after":null,"op":"c"}`,
		`{"op":"x"}`,
		`not json`,
	} {
		if rows, err := nx.ChangelogRows(tb, []byte(bad)); err == nil {
			t.Errorf("%s: no error, rows %q", bad, rows)
		}
	}
}

// TestFinalRows keeps, of an updating query, each key's rows of its
// highest version, and every row of an append-only one.
func TestFinalRows(t *testing.T) {
	const sep = "\x1f"
	lines := []string{
		"a" + sep + "1" + sep + "a1",
		"b" + sep + "1" + sep + "b1",
		"a" + sep + "3" + sep + "a3x",
		"a" + sep + "2" + sep + "a2",
		"a" + sep + "3" + sep + "a3y",
	}
	got, err := nx.FinalRows(nx.Table{Updating: true}, lines)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"a3x", "a3y", "b1"}; !slices.Equal(got, want) {
		t.Errorf("updating: got %q, want %q", got, want)
	}
	got, err = nx.FinalRows(nx.Table{}, lines)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"a1", "a2", "a3x", "a3y", "b1"}; !slices.Equal(got, want) {
		t.Errorf("append-only: got %q, want %q", got, want)
	}
	if _, err := nx.FinalRows(nx.Table{}, []string{"no separators"}); err == nil {
		t.Error("a malformed line: no error")
	}
}

// TestDiffRows compares multisets: a row twice on one side and once on
// the other differs once.
func TestDiffRows(t *testing.T) {
	d := nx.DiffRows([]string{"a", "b", "b", "d"}, []string{"b", "c", "d"})
	if !slices.Equal(d.OnlyA, []string{"a", "b"}) || !slices.Equal(d.OnlyB, []string{"c"}) || d.OK() {
		t.Errorf("got %+v", d)
	}
	if d := nx.DiffRows([]string{"a"}, []string{"a"}); !d.OK() {
		t.Errorf("equal rows differ: %+v", d)
	}
}

// TestProjectTies: two q19 results that number two bids of the same
// price in the other order agree on what the query decides; a result
// with a different price at a rank does not.
func TestProjectTies(t *testing.T) {
	tb, err := nx.TableOf("q19")
	if err != nil {
		t.Fatal(err)
	}
	row := func(bidder, price, rank string) string {
		return strings.Join([]string{"7", bidder, price, `"c"`, `"u"`, "2026-01-01 00:00:00.000", `"x"`, rank}, "\t")
	}
	a := []string{row("1", "50", "1"), row("2", "50", "2"), row("3", "40", "3")}
	b := []string{row("2", "50", "1"), row("1", "50", "2"), row("3", "40", "3")}
	c := []string{row("2", "50", "1"), row("1", "45", "2"), row("3", "40", "3")}
	slices.Sort(a)
	slices.Sort(b)
	slices.Sort(c)
	if nx.DiffRows(a, b).OK() {
		t.Fatal("the rows themselves should differ")
	}
	pa, err := tb.Project(a)
	if err != nil {
		t.Fatal(err)
	}
	pb, _ := tb.Project(b)
	pc, _ := tb.Project(c)
	if d := nx.DiffRows(pa, pb); !d.OK() {
		t.Errorf("tied bids numbered in the other order differ: %+v", d)
	}
	if d := nx.DiffRows(pa, pc); d.OK() {
		t.Error("a different price at rank 2 agrees")
	}
	if _, err := tb.Project([]string{"1\t2"}); err == nil {
		t.Error("a row with too few values was projected")
	}
	for _, q := range nx.Queries() {
		tb, _ := nx.TableOf(q.Name)
		if _, err := tb.Project(nil); err != nil {
			t.Errorf("%s: %v", q.Name, err)
		}
	}
}
