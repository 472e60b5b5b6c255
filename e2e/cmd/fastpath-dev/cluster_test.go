package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

func TestClusterRejectsBadCommandLines(t *testing.T) {
	for _, args := range [][]string{{"cluster", "up", "extra"}, {"cluster", "nope"}, {"cluster", "install", "--unknown"}} {
		var out, errb bytes.Buffer
		if got := Main(context.Background(), args, &out, &errb, deps{}); got != 2 {
			t.Errorf("Main(%q) = %d, want 2 (stderr %q)", args, got, errb.String())
		}
	}
	var out, errb bytes.Buffer
	if got := Main(context.Background(), []string{"cluster", "--help"}, &out, &errb, deps{}); got != 0 || !strings.Contains(errb.String(), "REAL single-node") {
		t.Errorf("--help: %d, %q", got, errb.String())
	}
}
