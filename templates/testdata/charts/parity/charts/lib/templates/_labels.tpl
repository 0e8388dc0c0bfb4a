{{- define "lib.labels" -}}
app.kubernetes.io/instance: {{ .Release.Name }}
team: {{ .Values.global.team }}
{{- end -}}
