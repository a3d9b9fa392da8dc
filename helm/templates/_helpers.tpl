{{/* Names, labels and the addresses the components dial. */}}

{{- define "tunefarm.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "tunefarm.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "tunefarm.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: {{ include "tunefarm.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: tunefarm
{{- end -}}

{{/* Selector labels of one component: include with (list $ "agent"). */}}
{{- define "tunefarm.selectorLabels" -}}
{{- $ := index . 0 -}}
app.kubernetes.io/name: {{ include "tunefarm.name" $ }}
app.kubernetes.io/instance: {{ $.Release.Name }}
app.kubernetes.io/component: {{ index . 1 }}
{{- end -}}

{{- define "tunefarm.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{- define "tunefarm.coordinatorHost" -}}
{{- printf "%s-coordinator.%s.svc.%s" (include "tunefarm.fullname" .) .Release.Namespace .Values.clusterDomain -}}
{{- end -}}

{{- define "tunefarm.analyzerHost" -}}
{{- printf "%s-analyzer.%s.svc.%s" (include "tunefarm.fullname" .) .Release.Namespace .Values.clusterDomain -}}
{{- end -}}

{{- define "tunefarm.tokensSecret" -}}
{{- default (printf "%s-tokens" (include "tunefarm.fullname" .)) .Values.auth.tokens.existingSecret -}}
{{- end -}}

{{- define "tunefarm.agentTokenSecret" -}}
{{- default (printf "%s-agent-token" (include "tunefarm.fullname" .)) .Values.auth.agentToken.existingSecret -}}
{{- end -}}

{{- define "tunefarm.tlsSecret" -}}
{{- default (printf "%s-tls" (include "tunefarm.fullname" .)) .Values.tls.existingSecret -}}
{{- end -}}

{{- define "tunefarm.curveSecret" -}}
{{- default (printf "%s-curve" (include "tunefarm.fullname" .)) .Values.curve.existingSecret -}}
{{- end -}}

{{- define "tunefarm.curveAgentsSecret" -}}
{{- default (printf "%s-curve-agents" (include "tunefarm.fullname" .)) .Values.curve.agentKeysSecret -}}
{{- end -}}

{{/* Refuse combinations the schema cannot express. */}}
{{- define "tunefarm.validate" -}}
{{- if and .Values.auth.enabled .Values.auth.tokens.existingSecret (not .Values.auth.agentToken.existingSecret) -}}
{{- fail "auth.agentToken.existingSecret is required when auth.tokens.existingSecret is set: the chart cannot read the agent's token out of your tokens file" -}}
{{- end -}}
{{- if and .Values.auth.enabled .Values.auth.tokens.existingSecret .Values.auth.tokens.extraEntries -}}
{{- fail "auth.tokens.extraEntries only applies to a generated tokens file; put the entries in your own Secret (auth.tokens.existingSecret)" -}}
{{- end -}}
{{- end -}}

{{/* Pod-level hardening shared by the three daemons (the image's user). */}}
{{- define "tunefarm.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 10001
runAsGroup: 10001
fsGroup: 10001
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{- define "tunefarm.containerSecurityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities:
  drop: [ALL]
{{- end -}}
