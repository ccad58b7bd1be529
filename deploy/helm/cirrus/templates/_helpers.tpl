{{/*
Shared pieces of the chart's objects. Each object is the one of the kustomize bases with the same
name (deploy/standalone, deploy/knative): test/deploy/helm.test.ts renders both and compares them.
*/}}

{{/* Labels of every object: kustomize's part-of, and Helm's own. */}}
{{- define "cirrus.labels" -}}
app.kubernetes.io/part-of: cirrus
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* The labels of a workload and its pods' selector: (list $ "component"). */}}
{{- define "cirrus.selector" -}}
app.kubernetes.io/name: cirrus
app.kubernetes.io/component: {{ . }}
{{- end }}

{{- define "cirrus.image" -}}
{{- $tag := .Values.image.tag | default .Chart.AppVersion -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ $tag }}
{{- end -}}
{{- end }}

{{/* image, and imagePullPolicy when set. */}}
{{- define "cirrus.containerImage" -}}
image: {{ include "cirrus.image" . }}
{{- with .Values.image.pullPolicy }}
imagePullPolicy: {{ . }}
{{- end }}
{{- end }}

{{- define "cirrus.imagePullSecrets" -}}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{/*
The taints of a fresh cluster's nodes, tolerated by what initializes them: uninitialized (kubelets
with --cloud-provider=external), not-ready (a network plugin not ready yet), the control plane's,
and CriticalAddonsOnly.
*/}}
{{- define "cirrus.bootstrapTolerations" -}}
tolerations:
  - key: node.cloudprovider.kubernetes.io/uninitialized
    value: "true"
    effect: NoSchedule
  - key: node.kubernetes.io/not-ready
    operator: Exists
  - key: node-role.kubernetes.io/control-plane
    operator: Exists
    effect: NoSchedule
  - key: CriticalAddonsOnly
    operator: Exists
{{- end }}

{{- define "cirrus.podSecurityContext" -}}
securityContext:
  runAsNonRoot: true
  runAsUser: 1000
  runAsGroup: 1000
  seccompProfile:
    type: RuntimeDefault
{{- end }}

{{- define "cirrus.containerSecurityContext" -}}
securityContext:
  allowPrivilegeEscalation: false
  readOnlyRootFilesystem: true
  capabilities:
    drop: [ALL]
{{- end }}

{{/* readinessProbe and livenessProbe on the port named http. */}}
{{/*
Where the kubelet probes a host-network workload: the address it listens on (bindAddress), or
loopback when that is every address (0.0.0.0 or ::).
*/}}
{{- define "cirrus.probeHost" -}}
{{- if has .Values.bindAddress (list "0.0.0.0" "::") -}}127.0.0.1{{- else -}}{{ .Values.bindAddress }}{{- end -}}
{{- end }}

{{- define "cirrus.probes" -}}
readinessProbe:
  httpGet:
    host: {{ include "cirrus.probeHost" . }}
    path: /readyz
    port: http
  periodSeconds: 5
livenessProbe:
  httpGet:
    host: {{ include "cirrus.probeHost" . }}
    path: /healthz
    port: http
  periodSeconds: 10
  failureThreshold: 3
{{- end }}

{{/* The cloud-config volume: the Secret, or the ConfigMap when cloudConfig.configMapName is set. */}}
{{- define "cirrus.cloudConfigVolume" -}}
- name: cloud-config
{{- if .Values.cloudConfig.configMapName }}
  configMap:
    name: {{ .Values.cloudConfig.configMapName }}
{{- else }}
  secret:
    secretName: {{ include "cirrus.cloudConfigSecret" . }}
{{- end }}
{{- end }}

{{/* The cloud-config's Secret: cloudConfig.secretName, cirrus-cloud-config when the chart creates it. */}}
{{- define "cirrus.cloudConfigSecret" -}}
{{ .Values.cloudConfig.secretName | default "cirrus-cloud-config" }}
{{- end }}

{{/* The signing secret's Secret: signing.secretName, cirrus-signing when the chart creates it. */}}
{{- define "cirrus.signingSecret" -}}
{{ .Values.signing.secretName | default "cirrus-signing" }}
{{- end }}

{{- define "cirrus.cloudConfigMount" -}}
- name: cloud-config
  mountPath: /etc/cirrus/cloud-config
  readOnly: true
{{- end }}

{{/* A ServiceAccount: (dict "root" $ "name" "cirrus-relay" "roleArn" "arn:..."). */}}
{{- define "cirrus.serviceAccount" -}}
{{- $annotations := deepCopy .root.Values.serviceAccount.annotations -}}
{{- if .roleArn }}{{ $_ := set $annotations "eks.amazonaws.com/role-arn" .roleArn }}{{ end -}}
apiVersion: v1
kind: ServiceAccount
metadata:
  name: {{ .name }}
  namespace: {{ .root.Release.Namespace }}
  labels:
    {{- include "cirrus.labels" .root | nindent 4 }}
  {{- with $annotations }}
  annotations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
{{- end }}

{{/*
A ClusterRole and its binding to one ServiceAccount of the release's namespace:
(dict "root" $ "name" "cirrus-relay" "account" "cirrus-relay" "rules" (list ...)).
*/}}
{{- define "cirrus.clusterRole" -}}
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: {{ .name }}
  labels:
    {{- include "cirrus.labels" .root | nindent 4 }}
rules:
  {{- toYaml .rules | nindent 2 }}
---
{{ include "cirrus.binding" (dict "root" .root "kind" "ClusterRole" "name" .name "account" .account) }}
{{- end }}

{{/*
A Role in `namespace` and its binding: (dict "root" $ "name" ... "namespace" ... "account" ... "rules" ...).
*/}}
{{- define "cirrus.role" -}}
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: {{ .name }}
  namespace: {{ .namespace }}
  labels:
    {{- include "cirrus.labels" .root | nindent 4 }}
rules:
  {{- toYaml .rules | nindent 2 }}
---
{{ include "cirrus.binding" (dict "root" .root "kind" "Role" "name" .name "account" .account "namespace" .namespace) }}
{{- end }}

{{- define "cirrus.binding" -}}
apiVersion: rbac.authorization.k8s.io/v1
kind: {{ .kind }}Binding
metadata:
  name: {{ .name }}
  {{- with .namespace }}
  namespace: {{ . }}
  {{- end }}
  labels:
    {{- include "cirrus.labels" .root | nindent 4 }}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: {{ .kind }}
  name: {{ .name }}
subjects:
  - kind: ServiceAccount
    name: {{ .account }}
    namespace: {{ .root.Release.Namespace }}
{{- end }}

{{/*
Events about Nodes go to `default`: a Role there to create them, as deploy/knative's
<function>/rbac/rbac.yaml: (dict "root" $ "account" "cirrus-node-init").
*/}}
{{- define "cirrus.eventsRole" -}}
{{ include "cirrus.role" (dict "root" .root "name" (printf "%s-events" .account) "namespace" "default" "account" .account "rules" (list (dict "apiGroups" (list "") "resources" (list "events") "verbs" (list "create")))) }}
{{- end }}

{{/*
A leader-elected relay's Lease and known-keys cursor (ADR 0014, relay/cursor.ts): the ConfigMaps it
records the objects it knows in (four parts per resource, created empty so that it needs no right
to create ConfigMaps), and a Role for exactly its Lease and those ConfigMaps.
(dict "root" $ "lease" "cirrus-relay" "account" "cirrus-relay" "resources" (list "nodes" "services")).
*/}}
{{- define "cirrus.leader" -}}
{{- $root := .root -}}
{{- $names := list -}}
{{- range .resources }}
{{- $names = append $names (printf "%s-known-%s" $.lease .) -}}
{{- end }}
{{- $parts := list -}}
{{- range $names }}
{{- $parts = concat $parts (list . (printf "%s-1" .) (printf "%s-2" .) (printf "%s-3" .)) -}}
{{- end }}
{{- $rules := list
  (dict "apiGroups" (list "coordination.k8s.io") "resources" (list "leases") "resourceNames" (list .lease) "verbs" (list "get" "update"))
  (dict "apiGroups" (list "coordination.k8s.io") "resources" (list "leases") "verbs" (list "create"))
  (dict "apiGroups" (list "") "resources" (list "configmaps") "resourceNames" $parts "verbs" (list "get" "patch")) -}}
{{ include "cirrus.role" (dict "root" $root "name" (printf "%s-lease" .lease) "namespace" $root.Release.Namespace "account" .account "rules" $rules) }}
{{- range $parts }}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ . }}
  namespace: {{ $root.Release.Namespace }}
  labels:
    {{- include "cirrus.labels" $root | nindent 4 }}
    app.kubernetes.io/managed-by: cirrus
  annotations:
    description: >-
      Part of the objects the leading relay knows (ADR 0014). Written by the relay; deleting it
      loses only the deletes of those gone meanwhile.
{{- end }}
{{- end }}

{{/*
The static provider's allocations ConfigMaps (docs/adr/0028-sharded-ipam-record.md): the eight parts
cirrus-lb-ipam-0 … -7, and cirrus-lb-ipam, the single ConfigMap of earlier versions, kept so that an
upgrade does not delete it before cirrus moves its entries into the parts; and the right to read and
patch them: (dict "root" $ "account" ...).
*/}}
{{- define "cirrus.staticProvider" -}}
{{- $names := list "cirrus-lb-ipam" -}}
{{- range $index := until 8 }}{{ $names = append $names (printf "cirrus-lb-ipam-%d" $index) }}{{ end -}}
{{- range $name := $names }}
apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ $name }}
  namespace: {{ $.root.Release.Namespace }}
  labels:
    {{- include "cirrus.labels" $.root | nindent 4 }}
    app.kubernetes.io/managed-by: cirrus
  annotations:
    description: >-
      Load balancer addresses handed out by cirrus's static provider: one key per Service UID, in the
      part of each of its addresses. Written by cirrus; deleting a key frees the address while its
      Service may still use it.
---
{{ end -}}
{{ include "cirrus.role" (dict "root" .root "name" "cirrus-static-lb-ipam" "namespace" .root.Release.Namespace "account" .account "rules" (list (dict "apiGroups" (list "") "resources" (list "configmaps") "resourceNames" $names "verbs" (list "get" "patch")))) }}
{{- end }}

{{/* Whether function `.name` is among .root.Values.controllers ("true" or ""). */}}
{{- define "cirrus.enabled" -}}
{{- if has .name .root.Values.controllers }}true{{ end -}}
{{- end }}
