{{/* Shared snippets of lahar's chart (kept to the Go-template subset lahar.chart renders). */}}
{{- define "lahar.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag }}
{{- end }}
