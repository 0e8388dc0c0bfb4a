{{- define "anyvalues.echo" -}}
{{ toYaml . }}
{{- end -}}
