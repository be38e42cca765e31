{{/* The container image of the scheduler and the agent. */}}
{{- define "gpusched.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}
