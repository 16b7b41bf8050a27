{{/* Labels every object of the release carries. */}}
{{- define "relsync.labels" -}}
app.kubernetes.io/name: relsync
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* The workload's name and pod selector label (a StatefulSet, or a Deployment with persistence.enabled=false). */}}
{{- define "relsync.workloadName" -}}
{{- if eq .Values.mode "sidecar" -}}{{ .Values.operator.deploymentName }}{{- else -}}relsync{{- end -}}
{{- end -}}

{{/* StatefulSet: the store on a claim per replica; Deployment: the store in an emptyDir. */}}
{{- define "relsync.workloadKind" -}}
{{- if .Values.persistence.enabled -}}StatefulSet{{- else -}}Deployment{{- end -}}
{{- end -}}

{{/* The Lease relsync holds: leaderElection.name, else relsync-<agentName> as config/compile-config.ts makes it. */}}
{{- define "relsync.leaseName" -}}
{{- $le := .Values.config.leaderElection | default dict -}}
{{- $le.name | default (printf "relsync-%s" (regexReplaceAll "[^a-z0-9.-]" (lower .Values.config.agentName) "-")) -}}
{{- end -}}
