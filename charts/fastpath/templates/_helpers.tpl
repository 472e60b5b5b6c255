{{- define "fastpath.labels" -}}
app.kubernetes.io/name: fastpath
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{/*
fastpath.image: the image of a component (operator, agent, bench, domainHook, the keys
under image:), <registry>/<repository>@<digest> when it has a digest, else
<registry>/<repository>:<tag> (its tag, else image.tag, else the chart's appVersion).
An empty image.registry leaves the repository as it is. Call with (dict "root" . "component" KEY).
*/}}
{{- define "fastpath.image" -}}
{{- $v := .root.Values.image -}}
{{- $img := index $v .component | default dict -}}
{{- $repo := required (printf "image.%s.repository is required" .component) $img.repository -}}
{{- if $v.registry }}{{ $repo = printf "%s/%s" (trimSuffix "/" $v.registry) $repo }}{{ end -}}
{{- if $img.digest -}}
{{- if not (regexMatch "^sha256:[0-9a-f]{64}$" $img.digest) -}}
{{- fail (printf "image.%s.digest %q: want sha256:<64 lowercase hex digits>" .component $img.digest) -}}
{{- end -}}
{{ $repo }}@{{ $img.digest }}
{{- else -}}
{{ $repo }}:{{ $img.tag | default $v.tag | default .root.Chart.AppVersion }}
{{- end -}}
{{- end -}}

{{/*
fastpath.metricsPort: the metrics port of a component, "secure" when
metrics.secure is true, else "plain". Call with (dict "root" . "secure" N "plain" M).
*/}}
{{- define "fastpath.metricsPort" -}}
{{- if .root.Values.metrics.secure }}{{ .secure }}{{ else }}{{ .plain }}{{ end }}
{{- end }}

{{/*
fastpath.domainHookImage: the domain hook image, the binding plugins' sidecarImage.
*/}}
{{- define "fastpath.domainHookImage" -}}
{{ .Values.operator.domainHookImage | default (include "fastpath.image" (dict "root" . "component" "domainHook")) }}
{{- end -}}
