{{- define "pyrocketmq.fullname" -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "pyrocketmq.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "pyrocketmq.namesrvAddr" -}}
{{- $full := include "pyrocketmq.fullname" . -}}
{{- $addrs := list -}}
{{- range $i := until (int .Values.namesrv.replicas) -}}
{{- $addrs = append $addrs (printf "%s-namesrv-%d.%s-namesrv.%s.svc.cluster.local:%d" $full $i $full $.Release.Namespace (int $.Values.namesrv.port)) -}}
{{- end -}}
{{- join ";" $addrs -}}
{{- end -}}
