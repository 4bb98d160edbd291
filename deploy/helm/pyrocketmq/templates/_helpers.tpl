{{/* Object name prefix: fullnameOverride, else the release name (k8s contract: <release>-namesrv-0 ...). */}}
{{- define "pyrocketmq.fullname" -}}
{{- default .Release.Name .Values.fullnameOverride | trunc 40 | trimSuffix "-" -}}
{{- end -}}

{{- define "pyrocketmq.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Standard labels. Call with (dict "root" $ "component" "broker"). */}}
{{- define "pyrocketmq.labels" -}}
app.kubernetes.io/name: {{ include "pyrocketmq.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
app.kubernetes.io/part-of: pyrocketmq
helm.sh/chart: {{ printf "%s-%s" .root.Chart.Name .root.Chart.Version | replace "+" "_" }}
{{- if .component }}
app.kubernetes.io/component: {{ .component }}
{{- end }}
{{- with .root.Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* Selector labels. Call with (dict "root" $ "component" "broker"). */}}
{{- define "pyrocketmq.selectorLabels" -}}
app.kubernetes.io/name: {{ include "pyrocketmq.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "pyrocketmq.image" -}}
{{- if .Values.image.digest -}}
{{ printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else -}}
{{ printf "%s:%s" .Values.image.repository .Values.image.tag }}
{{- end -}}
{{- end -}}

{{- define "pyrocketmq.namesrvHeadless" -}}
{{- printf "%s-namesrv-headless" (include "pyrocketmq.fullname" .) -}}
{{- end -}}

{{- define "pyrocketmq.brokerName" -}}
{{- printf "%s-broker-%s" (include "pyrocketmq.fullname" .root) .group.name -}}
{{- end -}}

{{/* ';'-separated stable DNS names of the name server pods (never pod IPs). */}}
{{- define "pyrocketmq.namesrvAddr" -}}
{{- $full := include "pyrocketmq.fullname" . -}}
{{- $headless := include "pyrocketmq.namesrvHeadless" . -}}
{{- $addrs := list -}}
{{- range $i := until (int .Values.namesrv.replicas) -}}
{{- $addrs = append $addrs (printf "%s-namesrv-%d.%s.%s.svc.cluster.local:%d" $full $i $headless $.Release.Namespace (int $.Values.namesrv.port)) -}}
{{- end -}}
{{- join ";" $addrs -}}
{{- end -}}

{{/* The name server client Service (any name server answers route queries): host:port. */}}
{{- define "pyrocketmq.namesrvServiceAddr" -}}
{{- printf "%s-namesrv.%s.svc.cluster.local:%d" (include "pyrocketmq.fullname" .) .Release.Namespace (int .Values.namesrv.port) -}}
{{- end -}}

{{/* "true" when the controller (and etcd) run: controller.enabled, or by default when groups have several pods. */}}
{{- define "pyrocketmq.controllerEnabled" -}}
{{- $given := .Values.controller.enabled -}}
{{- if kindIs "invalid" $given -}}
{{- if gt (int .Values.broker.replicasPerBrokerGroup) 1 }}true{{ end -}}
{{- else if $given -}}true{{- end -}}
{{- end -}}

{{/* "true" when brokers replicate: several pods per group (static roles) or controller mode. */}}
{{- define "pyrocketmq.brokerHa" -}}
{{- if or (gt (int .Values.broker.replicasPerBrokerGroup) 1) (include "pyrocketmq.controllerEnabled" .) }}true{{ end -}}
{{- end -}}

{{/* "true" when broker_id comes from the pod ordinal (the container's script), not the ConfigMap. */}}
{{- define "pyrocketmq.brokerPerPodIds" -}}
{{- include "pyrocketmq.brokerHa" . -}}
{{- end -}}

{{- define "pyrocketmq.controllerServiceAddr" -}}
{{- printf "%s-controller.%s.svc.cluster.local:%d" (include "pyrocketmq.fullname" .) .Release.Namespace (int .Values.controller.port) -}}
{{- end -}}

{{- define "pyrocketmq.etcdHeadless" -}}
{{- printf "%s-etcd-headless" (include "pyrocketmq.fullname" .) -}}
{{- end -}}

{{/* ','-separated endpoints of every etcd member (stable DNS names): the controllers' etcd_endpoints (their client
skips a member that does not answer, and one behind a Service address could stay pinned to a member without quorum).
With TLS https://host:port: the controllers dial mutual TLS with their own certificate. */}}
{{- define "pyrocketmq.etcdEndpoints" -}}
{{- $full := include "pyrocketmq.fullname" . -}}
{{- $headless := include "pyrocketmq.etcdHeadless" . -}}
{{- $addrs := list -}}
{{- range $i := until (int .Values.etcd.replicas) -}}
{{- $scheme := ternary "https://" "" $.Values.tls.enabled -}}
{{- $addrs = append $addrs (printf "%s%s-etcd-%d.%s.%s.svc.cluster.local:%d" $scheme $full $i $headless $.Release.Namespace (int $.Values.etcd.clientPort)) -}}
{{- end -}}
{{- join "," $addrs -}}
{{- end -}}

{{/*
The broker container's args. One pod per group without the controller: plain `mqbroker`, as before. Otherwise a
POSIX sh script derives the per-pod values from the StatefulSet ordinal (the suffix of POD_NAME) and then execs
mqbroker (tini stays PID 1): in controller mode broker_id = ordinal + 1 and the controller elects the master;
with static roles ordinal 0 is the master (broker_id 0, broker.role) and ordinal n a SLAVE with broker_id n that
replicates from ordinal 0's HA port. Call with (dict "root" $ "group" $group).
*/}}
{{- define "pyrocketmq.brokerArgs" -}}
{{- $b := .root.Values.broker -}}
{{- if not (include "pyrocketmq.brokerPerPodIds" .root) -}}
{{- list "mqbroker" | toJson -}}
{{- else if include "pyrocketmq.controllerEnabled" .root -}}
{{- list "sh" "-c" "ordinal=\"${POD_NAME##*-}\"\nexport MQ_BROKER_BROKER_ID=\"$((ordinal + 1))\"\nexec mqbroker\n" | toJson -}}
{{- else -}}
{{- $name := include "pyrocketmq.brokerName" . -}}
{{- $master := printf "%s-0.%s-headless.%s.svc.cluster.local:%d" $name $name .root.Release.Namespace (int $b.haPort) -}}
{{- $script := printf "ordinal=\"${POD_NAME##*-}\"\nif [ \"$ordinal\" = 0 ]; then\n  export MQ_BROKER_BROKER_ID=0 MQ_BROKER_BROKER_ROLE=%s\nelse\n  export MQ_BROKER_BROKER_ID=\"$ordinal\" MQ_BROKER_BROKER_ROLE=SLAVE MQ_BROKER_HA_MASTER_ADDRESS=%s\nfi\nexec mqbroker\n" $b.role $master -}}
{{- list "sh" "-c" $script | toJson -}}
{{- end -}}
{{- end -}}

{{- define "pyrocketmq.gatewayServiceAddr" -}}
{{- printf "%s-gateway.%s.svc.cluster.local:%d" (include "pyrocketmq.fullname" .) .Release.Namespace (int .Values.gateway.service.port) -}}
{{- end -}}

{{/*
ConfigMap data: MQ_<PREFIX>_<FIELD> from a map of snake_case settings fields. Lists are joined with ','.
Call with (dict "prefix" "MQ_BROKER_" "config" $map).
*/}}
{{- define "pyrocketmq.configData" -}}
{{- $prefix := .prefix -}}
{{- range $key, $value := .config }}
{{- if kindIs "slice" $value }}
{{ printf "%s%s" $prefix (upper $key) }}: {{ join "," $value | quote }}
{{- else if kindIs "invalid" $value }}
{{ printf "%s%s" $prefix (upper $key) }}: ""
{{- else if or (kindIs "float64" $value) (kindIs "int64" $value) (kindIs "int" $value) }}
{{- if eq (float64 $value) (float64 (int64 $value)) }}
{{ printf "%s%s" $prefix (upper $key) }}: {{ int64 $value | toString | quote }}
{{- else }}
{{ printf "%s%s" $prefix (upper $key) }}: {{ $value | toString | quote }}
{{- end }}
{{- else }}
{{ printf "%s%s" $prefix (upper $key) }}: {{ $value | toString | quote }}
{{- end }}
{{- end }}
{{- end -}}

{{/* Chart-owned settings of each component. */}}
{{- define "pyrocketmq.namesrvOwnedConfig" -}}
listen_host: "0.0.0.0"
listen_port: {{ .Values.namesrv.port }}
metrics_port: {{ ternary .Values.metrics.port 0 .Values.metrics.enabled }}
cluster_name: {{ .Values.clusterName | quote }}
{{ include "pyrocketmq.authOwnedConfig" . }}
{{- include "pyrocketmq.tlsOwnedConfig" (dict "root" . "component" "namesrv") }}
{{- end -}}

{{/*
Call with (dict "root" $ "group" $group). broker_ip is per pod (env), not here; so are broker_id (and, with static
roles, broker_role) when a group has several pods: the container's script derives them from the pod's ordinal.
*/}}
{{- define "pyrocketmq.brokerOwnedConfig" -}}
{{- $b := .root.Values.broker }}
listen_host: "0.0.0.0"
listen_port: {{ $b.port }}
metrics_port: {{ ternary .root.Values.metrics.port 0 .root.Values.metrics.enabled }}
cluster_name: {{ .root.Values.clusterName | quote }}
broker_name: {{ .group.name | quote }}
{{- if not (include "pyrocketmq.brokerPerPodIds" .root) }}
broker_id: 0
{{- end }}
namesrv_addr: {{ include "pyrocketmq.namesrvAddr" .root | quote }}
store_path_root_dir: /var/lib/rocketmq/store
{{- if include "pyrocketmq.brokerHa" .root }}
ha_listen_port: {{ $b.haPort }}
{{- end }}
{{- if include "pyrocketmq.controllerEnabled" .root }}
enable_controller_mode: true
controller_addr: {{ include "pyrocketmq.controllerServiceAddr" .root | quote }}
broker_role: {{ $b.role | quote }}
{{- end }}
{{ include "pyrocketmq.authOwnedConfig" .root }}
{{- include "pyrocketmq.tlsOwnedConfig" (dict "root" .root "component" "broker") }}
{{- end -}}

{{- define "pyrocketmq.controllerOwnedConfig" -}}
listen_host: "0.0.0.0"
listen_port: {{ .Values.controller.port }}
metrics_port: {{ ternary .Values.metrics.port 0 .Values.metrics.enabled }}
etcd_endpoints: {{ include "pyrocketmq.etcdEndpoints" . | quote }}
{{ include "pyrocketmq.authOwnedConfig" . }}
{{- include "pyrocketmq.tlsOwnedConfig" (dict "root" . "component" "controller") }}
{{- end -}}

{{- define "pyrocketmq.gatewayOwnedConfig" -}}
listen_host: "0.0.0.0"
listen_port: {{ .Values.gateway.port }}
metrics_port: {{ ternary .Values.metrics.port 0 .Values.metrics.enabled }}
cluster_name: {{ .Values.clusterName | quote }}
namesrv_addr: {{ include "pyrocketmq.namesrvAddr" . | quote }}
{{ include "pyrocketmq.authOwnedConfig" . }}
{{- include "pyrocketmq.tlsOwnedConfig" (dict "root" . "component" "gateway") }}
{{- end -}}

{{/* Pod-level security context (restricted Pod Security Standard). */}}
{{- define "pyrocketmq.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: {{ .Values.podSecurityContext.runAsUser }}
runAsGroup: {{ .Values.podSecurityContext.runAsGroup }}
fsGroup: {{ .Values.podSecurityContext.fsGroup }}
fsGroupChangePolicy: {{ .Values.podSecurityContext.fsGroupChangePolicy }}
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{- define "pyrocketmq.containerSecurityContext" -}}
runAsNonRoot: true
runAsUser: {{ .Values.podSecurityContext.runAsUser }}
runAsGroup: {{ .Values.podSecurityContext.runAsGroup }}
allowPrivilegeEscalation: false
privileged: false
readOnlyRootFilesystem: true
capabilities:
  drop: [ALL]
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{/* checkov skip annotations, each with its reason (README.md lists them). Empty when nothing is skipped. */}}
{{- /* Call with the root context, or (dict "root" $ "envSecrets" true) for pods that take the auth Secret as env. */ -}}
{{- define "pyrocketmq.checkovAnnotations" -}}
{{- $root := .root | default . -}}
{{- $skips := list -}}
{{- if not $root.Values.image.digest -}}
{{- $skips = append $skips "CKV_K8S_43=The image is referenced by tag while image.digest is empty; set image.digest to pin it (docs/deployment.md)" -}}
{{- if ne $root.Values.image.pullPolicy "Always" -}}
{{- $skips = append $skips (printf "CKV_K8S_15=image.pullPolicy is %s on purpose (images side-loaded into a dev cluster); use Always or image.digest elsewhere" $root.Values.image.pullPolicy) -}}
{{- end -}}
{{- end -}}
{{- if and .envSecrets $root.Values.auth.enabled -}}
{{- $skips = append $skips "CKV_K8S_35=The services read settings from env only (pydantic-settings): the auth Secret reaches them by secretKeyRef, never a ConfigMap, and is never logged" -}}
{{- end -}}
{{- range $i, $skip := $skips }}
checkov.io/skip{{ add1 $i }}: {{ $skip | quote }}
{{- end -}}
{{- end -}}

{{/*
Probes. Plaintext: native gRPC probes on grpc.health.v1 (service ""). TLS: the kubelet's gRPC probe cannot speak
TLS, so the probes open a TCP connection to the gRPC port instead. Call with (dict "port" 9876 "c" $componentValues
"tls" $tlsEnabled).
*/}}
{{- define "pyrocketmq.probeAction" -}}
{{- if .tls }}
tcpSocket:
  port: {{ .port }}
{{- else }}
grpc:
  port: {{ .port }}
{{- end }}
{{- end -}}

{{- define "pyrocketmq.probes" -}}
{{- $action := include "pyrocketmq.probeAction" . | trim }}
startupProbe:
  {{- $action | nindent 2 }}
  periodSeconds: {{ .c.startupProbe.periodSeconds }}
  failureThreshold: {{ .c.startupProbe.failureThreshold }}
  timeoutSeconds: 2
readinessProbe:
  {{- $action | nindent 2 }}
  periodSeconds: {{ .c.readinessProbe.periodSeconds }}
  failureThreshold: {{ .c.readinessProbe.failureThreshold }}
  timeoutSeconds: 2
livenessProbe:
  {{- $action | nindent 2 }}
  periodSeconds: {{ .c.livenessProbe.periodSeconds }}
  failureThreshold: {{ .c.livenessProbe.failureThreshold }}
  timeoutSeconds: 3
{{- end -}}

{{/*
Scheduling fields of the pod templates. Call with (dict "root" $ "component" "broker" "c" $componentValues); a
replicated broker group adds "group" $groupName: the preset then keeps the pods of that group (master and slaves)
apart (required when hard, preferred when soft) and only prefers to spread the groups over nodes.
*/}}
{{- define "pyrocketmq.scheduling" -}}
{{- with .c.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .c.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- if .c.affinity }}
affinity:
  {{- toYaml .c.affinity | nindent 2 }}
{{- else if .c.podAntiAffinityPreset }}
affinity:
  podAntiAffinity:
    {{- $selector := include "pyrocketmq.selectorLabels" (dict "root" .root "component" .component) | fromYaml }}
    {{- $componentTerm := dict "topologyKey" "kubernetes.io/hostname" "labelSelector" (dict "matchLabels" $selector) }}
    {{- $term := $componentTerm }}
    {{- $preferred := list }}
    {{- if .group }}
    {{- $term = dict "topologyKey" "kubernetes.io/hostname" "labelSelector" (dict "matchLabels" (merge (dict "pyrocketmq.io/broker-group" .group) $selector)) }}
    {{- $preferred = append $preferred (dict "weight" 50 "podAffinityTerm" $componentTerm) }}
    {{- end }}
    {{- if eq .c.podAntiAffinityPreset "hard" }}
    requiredDuringSchedulingIgnoredDuringExecution:
      {{- list $term | toYaml | nindent 6 }}
    {{- else }}
    {{- $preferred = prepend $preferred (dict "weight" 100 "podAffinityTerm" $term) }}
    {{- end }}
    {{- with $preferred }}
    preferredDuringSchedulingIgnoredDuringExecution:
      {{- toYaml . | nindent 6 }}
    {{- end }}
{{- end }}
{{- with .c.topologySpreadConstraints }}
topologySpreadConstraints:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .c.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- end -}}

{{- define "pyrocketmq.imagePullSecrets" -}}
{{- with .Values.imagePullSecrets -}}
imagePullSecrets:
{{- range . }}
  - name: {{ . }}
{{- end }}
{{- end }}
{{- end -}}

{{- define "pyrocketmq.tmpVolume" -}}
- name: tmp
  emptyDir:
    sizeLimit: {{ .Values.tmpVolume.sizeLimit }}
{{- end -}}

{{/* A ServiceAccount without an automounted token. Call with (dict "root" $ "component" "broker"). */}}
{{- define "pyrocketmq.serviceAccount" -}}
{{- if .root.Values.serviceAccount.create }}
apiVersion: v1
kind: ServiceAccount
metadata:
  name: {{ include "pyrocketmq.fullname" .root }}-{{ .component }}
  namespace: {{ .root.Release.Namespace }}
  labels:
    {{- include "pyrocketmq.labels" . | nindent 4 }}
  {{- with .root.Values.serviceAccount.annotations }}
  annotations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
automountServiceAccountToken: false
{{- end }}
{{- end -}}

{{/* NetworkPolicy ingress rule for the metrics port from the monitoring namespace. */}}
{{- define "pyrocketmq.metricsIngress" -}}
{{- if .Values.metrics.enabled }}
- from:
    - namespaceSelector:
        matchLabels:
          kubernetes.io/metadata.name: {{ .Values.networkPolicy.monitoringNamespace }}
  ports:
    - port: metrics
      protocol: TCP
{{- end }}
{{- end -}}

{{/* NetworkPolicy peer: admin pods (mqadmin, the Spark driver). */}}
{{- define "pyrocketmq.adminPeer" -}}
- podSelector:
    matchLabels:
      {{- toYaml .Values.networkPolicy.adminPodLabels | nindent 6 }}
  {{- with .Values.networkPolicy.adminNamespaceLabels }}
  namespaceSelector:
    matchLabels:
      {{- toYaml . | nindent 6 }}
  {{- end }}
{{- end -}}

{{/* NetworkPolicy peer: pods of this release with one of the given components. */}}
{{- define "pyrocketmq.componentsPeer" -}}
- podSelector:
    matchLabels:
      app.kubernetes.io/instance: {{ .root.Release.Name }}
    matchExpressions:
      - key: app.kubernetes.io/component
        operator: In
        values: {{ toJson .components }}
{{- end -}}

{{/* One broker group's ConfigMap data: chart-owned, then the group's config, then broker.config. */}}
{{- define "pyrocketmq.brokerConfigData" -}}
{{- $owned := include "pyrocketmq.brokerOwnedConfig" . | fromYaml -}}
{{- $config := merge $owned (deepCopy (.group.config | default dict)) (deepCopy .root.Values.broker.config) -}}
{{- include "pyrocketmq.configData" (dict "prefix" "MQ_BROKER_" "config" $config) -}}
{{- end -}}
