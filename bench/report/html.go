package report

import (
	"bytes"
	"fmt"
	"html/template"
)

var htmlTemplate = template.Must(template.New("html").Funcs(template.FuncMap{
	"machine": machineLine,
	"svg":     func(b []byte) template.HTML { return template.HTML(inlineSVG(b)) },
	"font":    func() template.CSS { return template.CSS(fontFace()) },
}).Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.Title}}</title>
<style>
{{font}}
body { font-family: "Liberation Sans", Arial, sans-serif; color: #222; max-width: 1100px; margin: 24px auto; padding: 0 16px; line-height: 1.4; }
h1 { font-size: 26px; margin-bottom: 4px; }
h2 { font-size: 19px; margin-top: 32px; border-bottom: 1px solid #ddd; padding-bottom: 4px; }
.machine { color: #555; font-size: 13px; }
.emulated { background: #fff4d6; border-left: 4px solid #E69F00; padding: 8px 12px; }
pre { background: #f4f4f4; padding: 8px 12px; font-size: 14px; }
table { border-collapse: collapse; font-size: 12px; margin: 8px 0; }
th, td { border: 1px solid #ccc; padding: 3px 7px; text-align: right; white-space: nowrap; }
th:first-child, td:first-child { text-align: left; }
th { background: #f4f4f4; }
tr.bold td { font-weight: bold; }
.wide { overflow-x: auto; }
figure { margin: 16px 0 28px; }
figure svg { width: 100%; height: auto; display: block; }
</style>
</head>
<body>
<h1>{{.Title}}</h1>
<p class="machine">{{machine .Machine}}</p>
{{if .Emulated}}<p class="emulated"><strong>Emulated:</strong> {{.Emulated}}</p>{{end}}
{{if .Lines}}<h2>Headline ratios</h2>
{{if .Headline}}<p>At {{.Headline}} (throughput){{if .LatencyHeadline}} and {{.LatencyHeadline}} (latency, lower is better){{end}}:</p>{{end}}
<pre>{{range .Lines}}{{.}}
{{end}}</pre>{{end}}
{{if .CPUNote}}<p>{{.CPUNote}}</p>{{end}}
{{range .Sections}}<h2>{{.Title}}</h2>
{{range .Charts}}<figure id="{{.Name}}" aria-label="{{.Title}}">{{svg .SVG}}</figure>
{{end}}{{end}}
{{with .Speedup}}{{if .Rows}}<h2>Speed-up per point</h2>
<p>Median throughput of each path over each reference path; higher is better. Headline rows are in bold.</p>
<div class="wide"><table>
<tr>{{range .Header}}<th>{{.}}</th>{{end}}</tr>
{{range $i, $r := .Rows}}<tr{{if index $.Speedup.Bold $i}} class="bold"{{end}}>{{range $r}}<td>{{.}}</td>{{end}}</tr>
{{end}}</table></div>{{end}}{{end}}
{{with .Directions}}{{if .Rows}}<h2>Transmit and receive</h2>
<p>TCP_STREAM (the client sends) beside TCP_MAERTS (the server sends) at the same point: median throughput in 10^6 bit/s and service demand in µs of CPU per KiB.</p>
<div class="wide"><table>
<tr>{{range .Header}}<th>{{.}}</th>{{end}}</tr>
{{range .Rows}}<tr>{{range .}}<td>{{.}}</td>{{end}}</tr>
{{end}}</table></div>{{end}}{{end}}
<h2>All runs</h2>
<p>Medians over repetitions with [min–max]; throughput in 10^6 bit/s.</p>
<div class="wide"><table>
<tr>{{range .Runs.Header}}<th>{{.}}</th>{{end}}</tr>
{{range .Runs.Rows}}<tr>{{range .}}<td>{{.}}</td>{{end}}</tr>
{{end}}</table></div>
</body>
</html>
`))

func htmlPage(v view) ([]byte, error) {
	var buf bytes.Buffer
	if err := htmlTemplate.Execute(&buf, v); err != nil {
		return nil, fmt.Errorf("failed to render HTML report: %w", err)
	}
	return buf.Bytes(), nil
}
