package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/fastpath-io/fastpath/bench/report"
)

func newReportCmd(stdout, stderr io.Writer) *cobra.Command {
	var out, title string
	cmd := &cobra.Command{
		Use:   "report RESULTS.json",
		Short: "render report.md, report.html and SVG charts from a results JSON file",
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return fmt.Errorf("want one results file (or - for stdin), got %d arguments", len(args))
			}
			return nil
		},
		RunE: func(_ *cobra.Command, args []string) error {
			r, files, err := report.RenderFile(args[0], out, report.Options{Title: title})
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
		},
	}
	cmd.Flags().StringVarP(&out, "out", "o", ".", "directory to write report.md, report.html and the charts to")
	cmd.Flags().StringVar(&title, "title", "", "report title (default \"Fastpath benchmark\")")
	return cmd
}
