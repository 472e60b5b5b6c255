package report

import (
	"bytes"
	"fmt"
	"strings"
	"text/template"
)

var mdTemplate = template.Must(template.New("md").Funcs(template.FuncMap{
	"machine": machineLine,
	"table":   mdTable,
}).Parse(`# {{.Title}}

{{machine .Machine}}
{{if .Emulated}}
> **Emulated:** {{.Emulated}}
{{end}}
{{- if .Lines}}
## Headline ratios
{{if .Headline}}
At {{.Headline}} (throughput){{if .LatencyHeadline}} and {{.LatencyHeadline}} (latency, lower is better){{end}}:
{{end}}
` + "```" + `
{{range .Lines}}{{.}}
{{end}}` + "```" + `
{{end}}
{{- if .CPUNote}}

{{.CPUNote}}
{{end}}
{{- range .Sections}}
## {{.Title}}
{{range .Charts}}
![{{.Title}}]({{.Name}}.svg)
{{end}}
{{- end}}
{{- if .Speedup.Rows}}
## Speed-up per point

Median throughput of each path over each reference path; higher is better.
Headline rows are in bold.

{{table .Speedup}}
{{end}}
{{- if .Directions.Rows}}
## Transmit and receive

TCP_STREAM (the client sends) beside TCP_MAERTS (the server sends) at the same
point: median throughput in 10^6 bit/s and service demand in µs of CPU per KiB.

{{table .Directions}}
{{end}}
## All runs

Medians over repetitions with [min–max]; throughput in 10^6 bit/s.

{{table .Runs}}`))

func markdown(v view) ([]byte, error) {
	var buf bytes.Buffer
	if err := mdTemplate.Execute(&buf, v); err != nil {
		return nil, fmt.Errorf("failed to render Markdown report: %w", err)
	}
	return buf.Bytes(), nil
}

// mdTable renders a GitHub-flavoured Markdown table; pipes in cells are
// escaped.
func mdTable(t table) string {
	esc := func(s string) string { return strings.ReplaceAll(s, "|", `\|`) }
	var b strings.Builder
	row := func(cells []string, bold bool) {
		b.WriteString("|")
		for _, c := range cells {
			c = esc(c)
			if bold {
				c = "**" + c + "**"
			}
			b.WriteString(" " + c + " |")
		}
		b.WriteString("\n")
	}
	row(t.Header, false)
	b.WriteString("|" + strings.Repeat(" --- |", len(t.Header)) + "\n")
	for i, r := range t.Rows {
		row(r, i < len(t.Bold) && t.Bold[i])
	}
	return b.String()
}
