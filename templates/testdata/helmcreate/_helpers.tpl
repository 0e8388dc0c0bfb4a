{{/*
Expand the name of the chart.
*/}}
{{- define "mychart.name" -}}
{{- default "mychart" .Spec.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "mychart.fullname" -}}
{{- if .Spec.fullnameOverride }}
{{- .Spec.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default "mychart" .Spec.nameOverride }}
{{- if contains $name .Name }}
{{- .Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "mychart.chart" -}}
{{- printf "%s-%s" "mychart" "0.1.0" | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "mychart.labels" -}}
helm.sh/chart: {{ include "mychart.chart" . }}
{{ include "mychart.selectorLabels" . }}
app.kubernetes.io/version: {{ .Spec.appVersion | quote }}
app.kubernetes.io/managed-by: Helm
{{- end }}

{{- define "mychart.selectorLabels" -}}
app.kubernetes.io/name: {{ include "mychart.name" . }}
app.kubernetes.io/instance: {{ .Name }}
{{- end }}
