{{/* The labels every object carries, and the pods' selector. */}}
{{- define "ioobserve.labels" -}}
app.kubernetes.io/name: ioobserve
{{- end }}
