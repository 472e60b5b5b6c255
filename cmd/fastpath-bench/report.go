package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/fastpath-io/fastpath/internal/bench/report"
	"github.com/fastpath-io/fastpath/internal/bench/results"
)

func init() {
	register("report", "render report.md, report.html and SVG charts from a results JSON file", reportCmd)
}

func reportCmd(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("report", flag.ContinueOnError)
	fs.SetOutput(stderr)
	out := fs.String("o", ".", "directory to write report.md, report.html and the charts to")
	title := fs.String("title", "", "report title (default \"Fastpath benchmark\")")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usageError{fmt.Errorf("want one results file (or - for stdin), got %d arguments", len(pos))}
	}
	in := io.Reader(os.Stdin)
	if pos[0] != "-" {
		f, err := os.Open(pos[0])
		if err != nil {
			return fmt.Errorf("failed to open results %s: %w", pos[0], err)
		}
		defer f.Close()
		in = f
	}
	doc, err := results.Decode(in)
	if err != nil {
		return fmt.Errorf("failed to read results %s: %w", pos[0], err)
	}
	r, err := report.Render(doc, report.Options{Title: *title})
	if err != nil {
		return err
	}
	files, err := r.WriteDir(*out)
	if err != nil {
		return err
	}
	for _, f := range files {
		fmt.Fprintln(stderr, "wrote", f)
	}
	for _, l := range r.Lines {
		fmt.Fprintln(stdout, l)
	}
	return nil
}
