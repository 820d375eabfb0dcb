package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRunRejectsBadInput: every mistake is one clear error naming what is
// wrong, before anything runs or is written.
func TestRunRejectsBadInput(t *testing.T) {
	dir := t.TempDir()
	full := filepath.Join(dir, "full")
	if err := os.MkdirAll(full, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(full, "x"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "nope"}, `unknown job "nope" (known: gatewaymeter)`},
		{[]string{"run", "gatewaymeter", "--input", filepath.Join(dir, "missing")}, "--input"},
		{[]string{"run", "gatewaymeter", "-D", "execution.checkpointing.intervall=1s"}, "execution.checkpointing.interval"},
		{[]string{"run", "gatewaymeter", "-D", "execution.checkpointing.mode=SOMETIMES"}, "EXACTLY_ONCE"},
		{[]string{"run", "gatewaymeter", "--output", full}, "is not empty"},
		{[]string{"run", "gatewaymeter", "--fail-after", "soon"}, "--fail-after"},
	} {
		cmd := newRootCmd()
		var out bytes.Buffer
		cmd.SetOut(&out)
		cmd.SetErr(&out)
		cmd.SetArgs(append(tc.args, "--checkpoint-dir", filepath.Join(dir, "ckpt")))
		err := cmd.Execute()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("weir %s: error %v, want one containing %q", strings.Join(tc.args, " "), err, tc.want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "ckpt")); err == nil {
		t.Error("a rejected run created the checkpoint directory")
	}
}
