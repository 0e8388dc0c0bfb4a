{{- define "parity.fullname" -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "parity.labels" -}}
{{ include "lib.labels" . }}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{/* Recursion through include: "3,2,1," for 3. */}}
{{- define "parity.countdown" -}}
{{- if gt (int .) 0 -}}
{{ . }},{{ include "parity.countdown" (sub (int .) 1) }}
{{- end -}}
{{- end -}}

{{- define "parity.snippet" -}}
greeting: {{ .Values.greeting | quote }}
word: {{ .Values.word | squote }}
annotations:
  {{- toYaml .Values.podAnnotations | nindent 2 }}
{{- end -}}
