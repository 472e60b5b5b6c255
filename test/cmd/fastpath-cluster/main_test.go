package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

func TestMainRejectsBadCommandLines(t *testing.T) {
	for _, args := range [][]string{{"up", "extra"}, {"nope"}, {"install", "--unknown"}} {
		var out, errb bytes.Buffer
		if got := Main(context.Background(), args, &out, &errb); got != 2 {
			t.Errorf("Main(%q) = %d, want 2 (stderr %q)", args, got, errb.String())
		}
	}
	var out, errb bytes.Buffer
	if got := Main(context.Background(), []string{"--help"}, &out, &errb); got != 0 || !strings.Contains(errb.String(), "REAL single-node") {
		t.Errorf("--help: %d, %q", got, errb.String())
	}
}
