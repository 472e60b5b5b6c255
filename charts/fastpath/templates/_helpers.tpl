{{- define "fastpath.labels" -}}
app.kubernetes.io/name: fastpath
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{- define "fastpath.image" -}}
{{ .root.Values.image.registry }}/fastpath-{{ .component }}:{{ .root.Values.image.tag | default .root.Chart.AppVersion }}
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
{{ .Values.operator.domainHookImage | default (include "fastpath.image" (dict "root" . "component" "domain-hook")) }}
{{- end -}}
