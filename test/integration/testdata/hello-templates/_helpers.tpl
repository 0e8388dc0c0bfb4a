{{- /*
  crds/charts/hello's helpers and values, ported: .Values.x is .Spec.x
  over the chart's values.yaml defaults, .Release.Name is .Name, and
  .Chart's fields are literal text (name hello, version 0.1.0, appVersion
  3.10). The chart's resources value is left out: the Hello CRD prunes it.
*/ -}}

{{- define "hello.fullname" -}}
{{- .Name | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "hello.selectorLabels" -}}
app.kubernetes.io/name: hello
app.kubernetes.io/instance: {{ .Name }}
{{- end }}

{{- /* stencil stamps app.kubernetes.io/managed-by: stencil, as it does over
  the chart's managed-by. */ -}}
{{- define "hello.labels" -}}
helm.sh/chart: hello-0.1.0
{{ include "hello.selectorLabels" . }}
app.kubernetes.io/version: "3.10"
{{- end }}

{{- /* The chart's config values: config.enabled (default true) and
  config.data (default empty). */ -}}
{{- define "hello.configEnabled" -}}
{{- get (get .Spec "config" (dict)) "enabled" true }}
{{- end }}

{{- /*
  The text the chart's templates/configmap.yaml renders under Helm, whose
  sha256sum is the chart's checksum/config annotation: the same bytes,
  with Helm's managed-by label as Helm prints it, so that the annotation
  is the chart's. Not with config.data set: toYaml returned as text (not
  as structure) quotes every key and string, Helm's only those that need
  it, so the checksum differs (the ConfigMap itself is the same).
*/ -}}
{{- define "hello.configmapText" }}
apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ include "hello.fullname" . }}
  labels:
    {{- include "hello.labels" . | nindent 4 }}
    app.kubernetes.io/managed-by: Helm
data:
  GREETING: {{ get .Spec "greeting" "hello" | quote }}
  {{- with get (get .Spec "config" (dict)) "data" (dict) }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
{{ end }}
