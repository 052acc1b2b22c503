{{/* The chart's name, cut to the 63 characters of a DNS label. */}}
{{- define "lakegate.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The release's full name, the name of every object it makes. */}}
{{- define "lakegate.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else if contains (include "lakegate.name" .) .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name (include "lakegate.name" .) | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}

{{/* The labels that pick the pods: the Service's and the PDB's selector. */}}
{{- define "lakegate.selectorLabels" -}}
app.kubernetes.io/name: {{ include "lakegate.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "lakegate.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{ include "lakegate.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "lakegate.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "lakegate.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "lakegate.secretName" -}}
{{- default (include "lakegate.fullname" .) .Values.secrets.existingSecret }}
{{- end }}

{{/* More than one replica shares state through cluster_dsn. */}}
{{- define "lakegate.clustered" -}}
{{- if gt (int .Values.replicaCount) 1 }}true{{ end }}
{{- end }}

{{/* The server's configuration file: the operator's settings, and those
the chart owns (the listener, the data dir and the drain's timings). */}}
{{- define "lakegate.config" -}}
{{- $owned := list "listen" "data_dir" "shutdown_delay" "drain_timeout" }}
{{- range $owned }}
{{- if hasKey $.Values.config . }}
{{- fail (printf "config.%s is set by the chart: use drain.* for the timings" .) }}
{{- end }}
{{- end }}
{{- $cfg := deepCopy .Values.config }}
{{- $_ := set $cfg "listen" (printf "0.0.0.0:%d" (int .Values.service.port)) }}
{{- $_ := set $cfg "data_dir" "/data" }}
{{- $_ := set $cfg "shutdown_delay" (printf "%ds" (int .Values.drain.shutdownDelaySeconds)) }}
{{- $_ := set $cfg "drain_timeout" (printf "%ds" (int .Values.drain.drainTimeoutSeconds)) }}
{{- toYaml $cfg }}
{{- end }}
