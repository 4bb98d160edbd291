{{/*
TLS and authentication helpers. Certificates come from cert-manager (tls.certManager), existing Secrets
(tls.existingSecrets) or, when neither is given, from the chart itself (templates/tls/generated.yaml: a CA and one
certificate per component, kept across upgrades); either way each pod mounts its component's Secret (tls.crt,
tls.key, ca.crt) read-only at tls.mountPath and the settings point at the files. The auth Secret is
auth.existingSecret or, when that is empty, one the chart generates (templates/auth/secret.yaml). Secrets never go
into a ConfigMap: the auth JSON values reach the pods as env with secretKeyRef.
*/}}

{{/* Where the certificates come from: "certManager", "existing" (any tls.existingSecrets.* named) or "generated". */}}
{{- define "pyrocketmq.tlsSource" -}}
{{- $tls := .Values.tls -}}
{{- $named := list -}}
{{- range $c, $name := $tls.existingSecrets -}}{{- if $name -}}{{- $named = append $named $c -}}{{- end -}}{{- end -}}
{{- if $tls.certManager.enabled -}}certManager
{{- else if $named -}}existing
{{- else -}}generated
{{- end -}}
{{- end -}}

{{/* Components holding a certificate: the servers, the admin client, and the controller and etcd when they run. */}}
{{- define "pyrocketmq.tlsComponents" -}}
{{- $components := list "namesrv" "broker" "gateway" "admin" -}}
{{- if include "pyrocketmq.controllerEnabled" . -}}
{{- $components = concat $components (list "controller" "etcd") -}}
{{- end -}}
{{- toJson $components -}}
{{- end -}}

{{/*
component -> the DNS names its peers dial (JSON), for cert-manager's Certificates and the generated certificates
alike. Name servers: their pods' names under the headless Service and the client Service; brokers: their pods'
stable names, which they advertise; gateway: its Service (plus tls.certManager.gatewayDnsNames); controller: the
Service brokers and mqadmin dial, and its identity as a DNS name (etcd admits a client by a DNS SAN,
--client-cert-allowed-hostname); etcd: its members' names (peer TLS). admin: a client, none.
*/}}
{{- define "pyrocketmq.tlsDnsNames" -}}
{{- $full := include "pyrocketmq.fullname" . -}}
{{- $ns := .Release.Namespace -}}
{{- $service := dict -}}
{{- range $c := list "namesrv" "gateway" "controller" -}}
{{- $svc := printf "%s-%s" $full $c -}}
{{- $_ := set $service $c (list $svc (printf "%s.%s" $svc $ns) (printf "%s.%s.svc" $svc $ns) (printf "%s.%s.svc.cluster.local" $svc $ns)) -}}
{{- end -}}
{{- $brokerNames := list -}}
{{- range $group := .Values.broker.groups -}}
{{- $name := include "pyrocketmq.brokerName" (dict "root" $ "group" $group) -}}
{{- $brokerNames = append $brokerNames (printf "*.%s-headless.%s.svc.cluster.local" $name $ns) -}}
{{- end -}}
{{- $names := dict
  "namesrv" (prepend $service.namesrv (printf "*.%s.%s.svc.cluster.local" (include "pyrocketmq.namesrvHeadless" .) $ns))
  "broker" $brokerNames
  "gateway" (concat $service.gateway (list "localhost") .Values.tls.certManager.gatewayDnsNames)
  "admin" (list) -}}
{{- if include "pyrocketmq.controllerEnabled" . -}}
{{- $controllerIdentity := include "pyrocketmq.tlsIdentity" (dict "root" . "component" "controller") -}}
{{- $_ := set $names "controller" (uniq (append $service.controller $controllerIdentity)) -}}
{{- $_ = set $names "etcd" (list (printf "*.%s.%s.svc.cluster.local" (include "pyrocketmq.etcdHeadless" .) $ns)) -}}
{{- end -}}
{{- toJson $names -}}
{{- end -}}

{{/* Certificate name (common name) of a component. Call with (dict "root" $ "component" "broker"). */}}
{{- define "pyrocketmq.tlsIdentity" -}}
{{- $given := index .root.Values.tls.identities .component -}}
{{- default (printf "%s-%s" (include "pyrocketmq.fullname" .root) .component) $given -}}
{{- end -}}

{{/* Secret holding a component's certificate. Call with (dict "root" $ "component" "broker"). */}}
{{- define "pyrocketmq.tlsSecretName" -}}
{{- if eq (include "pyrocketmq.tlsSource" .root) "existing" -}}
{{- index .root.Values.tls.existingSecrets .component -}}
{{- else -}}
{{- printf "%s-%s-tls" (include "pyrocketmq.fullname" .root) .component -}}
{{- end -}}
{{- end -}}

{{/* The generated CA's Secret (tls.crt, tls.key of the CA: what signs certificates on later upgrades). */}}
{{- define "pyrocketmq.tlsCaSecretName" -}}
{{- printf "%s-ca" (include "pyrocketmq.fullname" .) -}}
{{- end -}}

{{/*
What the chart does with one generated certificate at this install or upgrade (JSON): "spec" (a hash of its common
name, DNS names and IPs), "reuse" (true: the live Secret stays as it is) and "expires" (its notAfter date,
YYYY-MM-DD: the live one when reused, else the new one's). A live Secret is reused when the CA Secret is live (its
tls.crt and tls.key), the Secret holds tls.crt, tls.key and that CA as ca.crt, was issued for the same spec
(annotation pyrocketmq.io/certificate-spec) and expires more than tls.generated.renewBeforeDays from now
(annotation pyrocketmq.io/expires). Without a cluster (helm template) lookup finds nothing: everything is new.
Call with (dict "root" $ "component" "broker").
*/}}
{{- define "pyrocketmq.generatedCertState" -}}
{{- $root := .root -}}
{{- $gen := $root.Values.tls.generated -}}
{{- $spec := include "pyrocketmq.generatedCertSpec" . | sha256sum -}}
{{- $ca := (lookup "v1" "Secret" $root.Release.Namespace (include "pyrocketmq.tlsCaSecretName" $root)).data | default dict -}}
{{- $live := lookup "v1" "Secret" $root.Release.Namespace (include "pyrocketmq.tlsSecretName" .) | default dict -}}
{{- $data := $live.data | default dict -}}
{{- $annotations := ($live.metadata | default dict).annotations | default dict -}}
{{- $expires := index $annotations "pyrocketmq.io/expires" | default "" -}}
{{- $renewAt := sub (toDate "2006-01-02" $expires | unixEpoch | int64) (mul (int64 $gen.renewBeforeDays) 86400) -}}
{{- $reuse := and (index $ca "tls.crt") (index $ca "tls.key") (index $data "tls.crt") (index $data "tls.key") -}}
{{- $reuse = and $reuse (eq (index $data "ca.crt" | default "") (index $ca "tls.crt" | default "")) -}}
{{- $reuse = and $reuse (eq (index $annotations "pyrocketmq.io/certificate-spec" | default "") $spec) -}}
{{- $reuse = and $reuse (gt $renewAt (now | unixEpoch | int64)) -}}
{{- if not $reuse -}}
{{- $expires = now | dateModify (printf "+%dh" (mul (int $gen.validityDays) 24)) | date "2006-01-02" -}}
{{- end -}}
{{- toJson (dict "spec" $spec "reuse" (not (not $reuse)) "expires" $expires) -}}
{{- end -}}

{{/* Common name, DNS names and IPs of a generated certificate (JSON). Servers also name localhost and 127.0.0.1:
what a dial inside the pod (mqadmin in the gateway pod) or on a host network uses. Call like tlsSecretName. */}}
{{- define "pyrocketmq.generatedCertSpec" -}}
{{- $dns := index (include "pyrocketmq.tlsDnsNames" .root | fromJson) .component -}}
{{- $ips := list -}}
{{- if ne .component "admin" -}}
{{- $dns = uniq (append $dns "localhost") -}}
{{- $ips = list "127.0.0.1" -}}
{{- end -}}
{{- toJson (dict "cn" (include "pyrocketmq.tlsIdentity" .) "dns" $dns "ips" $ips) -}}
{{- end -}}

{{/* The Secret holding the init super user and the inner credentials: auth.existingSecret, else the generated one. */}}
{{- define "pyrocketmq.authSecretName" -}}
{{- default (printf "%s-auth" (include "pyrocketmq.fullname" .)) .Values.auth.existingSecret -}}
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
      name: {{ include "pyrocketmq.authSecretName" .root }}
      key: {{ $auth.secretKeys.initAuthenticationUser }}
{{- end }}
- name: {{ .prefix }}INNER_CLIENT_AUTHENTICATION_CREDENTIALS
  valueFrom:
    secretKeyRef:
      name: {{ include "pyrocketmq.authSecretName" .root }}
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

{{/*
Checksum of what a pod reads from its Secrets' names, not their data (rotation needs no restart: servers re-read
the files), except the expiry date of a generated certificate: a renewed one rolls its pods, which read their
client certificate at start. Call with (dict "root" $ "component" "broker").
*/}}
{{- define "pyrocketmq.securityChecksum" -}}
{{- $root := .root -}}
{{- $expires := "" -}}
{{- if and $root.Values.tls.enabled (eq (include "pyrocketmq.tlsSource" $root) "generated") -}}
{{- $expires = (include "pyrocketmq.generatedCertState" . | fromJson).expires -}}
{{- end -}}
{{- $authSecret := ternary (include "pyrocketmq.authSecretName" $root) "" $root.Values.auth.enabled -}}
{{- list $root.Values.tls $root.Values.auth.enabled $authSecret $root.Values.auth.secretKeys (include "pyrocketmq.tlsSecretName" .) $expires | toJson | sha256sum -}}
{{- end -}}
