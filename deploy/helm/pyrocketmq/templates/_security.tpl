{{/*
TLS and authentication helpers. Certificates come from cert-manager (tls.certManager) or existing Secrets
(tls.existingSecrets); either way each pod mounts its component's Secret (tls.crt, tls.key, ca.crt) read-only at
tls.mountPath and the settings point at the files. Secrets never go into a ConfigMap: the auth JSON values reach
the pods as env with secretKeyRef.
*/}}

{{/* Certificate name (common name) of a component. Call with (dict "root" $ "component" "broker"). */}}
{{- define "pyrocketmq.tlsIdentity" -}}
{{- $given := index .root.Values.tls.identities .component -}}
{{- default (printf "%s-%s" (include "pyrocketmq.fullname" .root) .component) $given -}}
{{- end -}}

{{/* Secret holding a component's certificate. Call with (dict "root" $ "component" "broker"). */}}
{{- define "pyrocketmq.tlsSecretName" -}}
{{- if .root.Values.tls.certManager.enabled -}}
{{- printf "%s-%s-tls" (include "pyrocketmq.fullname" .root) .component -}}
{{- else -}}
{{- index .root.Values.tls.existingSecrets .component -}}
{{- end -}}
{{- end -}}

{{/* The bootstrap Job runs when auth is on and there is something to create. */}}
{{- define "pyrocketmq.authBootstrap" -}}
{{- if and .Values.auth.enabled (or .Values.auth.users .Values.auth.acls) -}}true{{- end -}}
{{- end -}}

{{/*
Chart-owned TLS settings of a component (a YAML map merged into its ConfigMap data). Name servers and brokers
require client certificates (mutual TLS); name servers take RegisterBroker only from the broker identity, brokers
treat the broker, gateway and admin identities as components, controllers the broker (heartbeats, SyncStateSet
changes) and admin (elections by hand) identities. The gateway's client port asks for none.
Call with (dict "root" $ "component" "broker").
*/}}
{{- define "pyrocketmq.tlsOwnedConfig" -}}
{{- $tls := .root.Values.tls -}}
{{- if $tls.enabled }}
tls_enabled: true
tls_cert_file: {{ printf "%s/tls.crt" $tls.mountPath | quote }}
tls_key_file: {{ printf "%s/tls.key" $tls.mountPath | quote }}
tls_ca_file: {{ printf "%s/ca.crt" $tls.mountPath | quote }}
{{- if eq .component "gateway" }}
tls_client_auth: {{ $tls.gatewayClientAuth | quote }}
{{- else }}
tls_client_auth: "require"
{{- end }}
{{- if eq .component "namesrv" }}
component_identities: {{ include "pyrocketmq.tlsIdentity" (dict "root" .root "component" "broker") | quote }}
{{- else if eq .component "broker" }}
{{- $names := list }}
{{- range $c := list "broker" "gateway" "admin" }}
{{- $names = append $names (include "pyrocketmq.tlsIdentity" (dict "root" $.root "component" $c)) }}
{{- end }}
component_identities: {{ join "," $names | quote }}
{{- else if eq .component "controller" }}
{{- $names := list }}
{{- range $c := list "broker" "admin" }}
{{- $names = append $names (include "pyrocketmq.tlsIdentity" (dict "root" $.root "component" $c)) }}
{{- end }}
component_identities: {{ join "," $names | quote }}
{{- end }}
{{- end }}
{{- end -}}

{{/* Chart-owned auth switches of name servers, controllers, brokers and gateways (YAML map). Call with the root context. */}}
{{- define "pyrocketmq.authOwnedConfig" -}}
authentication_enabled: {{ .Values.auth.enabled }}
authorization_enabled: {{ .Values.auth.enabled }}
{{- end -}}

{{/*
env entries of name servers, controllers, brokers and gateways: the auth Secret's JSON values by secretKeyRef. Call with
(dict "root" $ "prefix" "MQ_BROKER_" "initUser" true).
*/}}
{{- define "pyrocketmq.authEnv" -}}
{{- $auth := .root.Values.auth -}}
{{- if $auth.enabled }}
{{- if .initUser }}
- name: {{ .prefix }}INIT_AUTHENTICATION_USER
  valueFrom:
    secretKeyRef:
      name: {{ $auth.existingSecret }}
      key: {{ $auth.secretKeys.initAuthenticationUser }}
{{- end }}
- name: {{ .prefix }}INNER_CLIENT_AUTHENTICATION_CREDENTIALS
  valueFrom:
    secretKeyRef:
      name: {{ $auth.existingSecret }}
      key: {{ $auth.secretKeys.innerClientAuthenticationCredentials }}
{{- end }}
{{- end -}}

{{/* mqadmin's TLS env (MQ_ADMIN_TLS_*) over the mounted certificate: `kubectl exec ... mqadmin` just works. */}}
{{- define "pyrocketmq.adminTlsEnv" -}}
{{- if .Values.tls.enabled }}
- name: MQ_ADMIN_TLS_ENABLED
  value: "true"
- name: MQ_ADMIN_TLS_CA_FILE
  value: {{ printf "%s/ca.crt" .Values.tls.mountPath | quote }}
- name: MQ_ADMIN_TLS_CERT_FILE
  value: {{ printf "%s/tls.crt" .Values.tls.mountPath | quote }}
- name: MQ_ADMIN_TLS_KEY_FILE
  value: {{ printf "%s/tls.key" .Values.tls.mountPath | quote }}
{{- end }}
{{- end -}}

{{/* The certificate volume of a pod (a list item). Call with (dict "root" $ "component" "broker"). */}}
{{- define "pyrocketmq.tlsVolume" -}}
{{- if .root.Values.tls.enabled }}
- name: tls
  secret:
    secretName: {{ include "pyrocketmq.tlsSecretName" . }}
    defaultMode: 0440
    items:
      - {key: tls.crt, path: tls.crt}
      - {key: tls.key, path: tls.key}
      - {key: ca.crt, path: ca.crt}
{{- end }}
{{- end -}}

{{- define "pyrocketmq.tlsVolumeMount" -}}
{{- if .Values.tls.enabled }}
- name: tls
  mountPath: {{ .Values.tls.mountPath }}
  readOnly: true
{{- end }}
{{- end -}}

{{/* Checksum of what a pod reads from its Secrets' names (not their data: rotation needs no restart). */}}
{{- define "pyrocketmq.securityChecksum" -}}
{{- list .root.Values.tls .root.Values.auth.enabled .root.Values.auth.existingSecret .root.Values.auth.secretKeys (include "pyrocketmq.tlsSecretName" .) | toJson | sha256sum -}}
{{- end -}}
