{{/*
Names. The full name is the release name (plus the chart name when the release name does not
contain it), cut to 63 characters, the limit of a DNS label.
*/}}
{{- define "neatroots.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "neatroots.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "neatroots.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The name of one service's objects: <fullname>-<component>. Takes (dict "root" $ "name" "ingest"). */}}
{{- define "neatroots.componentName" -}}
{{- printf "%s-%s" (include "neatroots.fullname" .root) .name | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Labels on every object. Takes (dict "root" $ "name" COMPONENT); name may be empty. */}}
{{- define "neatroots.labels" -}}
helm.sh/chart: {{ include "neatroots.chart" .root }}
app.kubernetes.io/name: {{ include "neatroots.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
{{- if .name }}
app.kubernetes.io/component: {{ .name }}
{{- end }}
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
app.kubernetes.io/part-of: neatroots
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
{{- end }}

{{/* Selector labels of one service's pods. Takes (dict "root" $ "name" COMPONENT). */}}
{{- define "neatroots.selectorLabels" -}}
app.kubernetes.io/name: {{ include "neatroots.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .name }}
{{- end }}

{{- define "neatroots.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{/*
One service's image: its own <service>.image.tag when set (an upgrade in order rolls one service
before another), else image.tag, else the chart's appVersion. Takes (dict "root" $ "values" $v).
*/}}
{{- define "neatroots.componentImage" -}}
{{- $tag := (.values.image | default dict).tag | default (default .root.Chart.AppVersion .root.Values.image.tag) }}
{{- printf "%s:%s" .root.Values.image.repository $tag }}
{{- end }}

{{/*
NEATROOTS_INTERNAL_TOKEN_REQUIRED, "true" or "false": internalTokenRequired when set. Empty: true,
except on an upgrade of a release whose chart-made Secret holds no NEATROOTS_INTERNAL_TOKEN yet
(made by a chart before the internal token): the pods of the build before, still running while
that upgrade rolls out, send no token, so it renders false, and the next upgrade (the Secret
holds the token by then) true. Kept apart so that the chart's checks can stand in for the lookup.
*/}}
{{- define "neatroots.internalTokenRequired" -}}
{{- $set := .Values.internalTokenRequired }}
{{- if kindIs "bool" $set }}
{{- ternary "true" "false" $set }}
{{- else if .Values.secrets.existingSecret }}
{{- "true" }}
{{- else }}
{{- $old := include "neatroots.releaseSecret" . | fromJson }}
{{- ternary "false" "true" (and (gt (len $old) 0) (not (hasKey ($old.data | default dict) "NEATROOTS_INTERNAL_TOKEN"))) }}
{{- end }}
{{- end }}

{{/* The chart's Secret as the cluster holds it now, as JSON ({} when there is none, and under helm template). */}}
{{- define "neatroots.releaseSecret" -}}
{{- lookup "v1" "Secret" .Release.Namespace (include "neatroots.secretName" .) | default dict | toJson }}
{{- end }}

{{- define "neatroots.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "neatroots.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "neatroots.configMapName" -}}
{{- printf "%s-config" (include "neatroots.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "neatroots.checksConfigMapName" -}}
{{- printf "%s-checks" (include "neatroots.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "neatroots.secretName" -}}
{{- default (include "neatroots.fullname" .) .Values.secrets.existingSecret }}
{{- end }}

{{/*
The Secret holding NEATROOTS_PG_URL, read by the review service alone (the only one that
uses Postgres): the chart's own "<fullname>-postgres", or secrets.existingPostgresSecret.
Empty when an existing Secret is used without one.
*/}}
{{- define "neatroots.postgresSecretName" -}}
{{- if .Values.secrets.existingSecret }}
{{- .Values.secrets.existingPostgresSecret }}
{{- else }}
{{- printf "%s-postgres" (include "neatroots.fullname" .) }}
{{- end }}
{{- end }}

{{/*
The services: name (the --target and the objects' suffix), the values key, and the ports each
listens on besides the admin port. One place, so that the ConfigMap's addresses and the
Services agree.
*/}}
{{- define "neatroots.components" -}}
ingest:
  values: ingest
  ports:
    - {name: otlp, port: {{ .Values.ports.otlp }}, appProtocol: grpc}
    - {name: otlp-http, port: {{ .Values.ports.otlpHttp }}, appProtocol: http}
    - {name: grpc, port: {{ .Values.ports.grpc }}, appProtocol: grpc}
rule-engine:
  values: ruleEngine
  ports:
    - {name: grpc, port: {{ .Values.ports.ruleEngine }}, appProtocol: grpc}
question:
  values: question
  ports:
    - {name: grpc, port: {{ .Values.ports.question }}, appProtocol: grpc}
review:
  values: review
  ports:
    - {name: grpc, port: {{ .Values.ports.review }}, appProtocol: grpc}
api:
  values: api
  ports:
    - {name: http, port: {{ .Values.ports.http }}, appProtocol: http}
{{- end }}

{{/*
The Service with a service's admin port (/healthz, /readyz, /metrics): its own Service when
that is a ClusterIP one; a NodePort or LoadBalancer Service leaves the admin port out (it would
publish the metrics and probes outside the cluster), and "<name>-admin", a ClusterIP Service,
carries it instead. Takes (dict "root" $ "name" COMPONENT).
*/}}
{{- define "neatroots.adminServiceName" -}}
{{- $c := get (include "neatroots.components" .root | fromYaml) .name }}
{{- $v := get .root.Values $c.values }}
{{- $fullName := include "neatroots.componentName" (dict "root" .root "name" .name) }}
{{- if eq $v.service.type "ClusterIP" }}
{{- $fullName }}
{{- else }}
{{- printf "%s-admin" ($fullName | trunc 57 | trimSuffix "-") }}
{{- end }}
{{- end }}

{{/* Fails rendering on values that cannot work, with a message naming the value. */}}
{{- define "neatroots.validate" -}}
{{- if not .Values.kafka.brokers }}
{{- fail "kafka.brokers: give at least one Kafka bootstrap address (host:port)" }}
{{- end }}
{{- if not .Values.secrets.existingSecret }}
{{- if not (trim .Values.redis.url) }}
{{- fail "redis.url: give the Redis URL (redis://host:6379), or secrets.existingSecret holding NEATROOTS_REDIS_URL" }}
{{- end }}
{{- if not (trim .Values.postgres.url) }}
{{- fail "postgres.url: give the PostgreSQL URL (postgres://user:password@host:5432/db), or secrets.existingSecret (and secrets.existingPostgresSecret holding NEATROOTS_PG_URL)" }}
{{- end }}
{{- end }}
{{- /* libs/platform/src/models/config.ts: an endpoint without its model stops every service. */}}
{{- range $role := list "llm" "decision" "reasoning" }}
{{- $m := get $.Values.models $role | default dict }}
{{- if and $m.url (not $m.model) }}
{{- fail (printf "models.%s.model: give the model to ask at models.%s.url (%s)" $role $role $m.url) }}
{{- end }}
{{- end }}
{{- /* A key listed twice (in one map or both) stops every service (NEATROOTS_API_KEYS: "entries
       1 (p) and 2 (p) have the same key"): named here by both entries, never by the key. */}}
{{- $seen := dict }}
{{- range $values := list "apiKeys" "ingestKeys" }}
{{- range $project, $key := get $.Values $values | default dict }}
{{- if or (contains "," $project) (contains "=" $project) (contains "," (toString $key)) (not $key) }}
{{- fail (printf "%s.%s: a project name may not contain ',' or '=', and its key must be a non-empty string without ','" $values $project) }}
{{- end }}
{{- $entry := printf "%s.%s" $values $project }}
{{- if hasKey $seen (toString $key) }}
{{- fail (printf "%s and %s have the same key: a key opens one project with one scope; give each its own" (get $seen (toString $key)) $entry) }}
{{- end }}
{{- $_ := set $seen (toString $key) $entry }}
{{- end }}
{{- end }}
{{- end }}

{{/*
A memory quantity ("512Mi", "1Gi", "800M", bytes) in MiB, as a float. Takes the quantity.
*/}}
{{- define "neatroots.memoryMiB" -}}
{{- $q := toString . | trim }}
{{- $n := regexFind "^[0-9]+(\\.[0-9]+)?" $q }}
{{- $unit := trimPrefix $n $q }}
{{- $per := dict "" (divf 1 1048576) "k" (divf 1000 1048576) "K" (divf 1000 1048576) "Ki" (divf 1 1024) "M" (divf 1000000 1048576) "Mi" 1 "G" (divf 1000000000 1048576) "Gi" 1024 "T" (divf 1000000000000 1048576) "Ti" 1048576 }}
{{- if or (not $n) (not (hasKey $per $unit)) }}
{{- fail (printf "a memory limit of %q: give a Kubernetes quantity such as 512Mi or 1Gi" $q) }}
{{- end }}
{{- mulf (float64 $n) (get $per $unit) }}
{{- end }}

{{/*
NODE_OPTIONS of a service's container: node's old generation (--max-old-space-size, MiB) at
heapPercent of its memory limit, so that V8 collects before the container's limit is reached
rather than the kernel killing the pod. Empty without a memory limit, with heapPercent 0, or
when the service's env sets NODE_OPTIONS itself. Takes (dict "root" $ "values" $v).
*/}}
{{- define "neatroots.nodeOptions" -}}
{{- $limit := ((.values.resources | default dict).limits | default dict).memory }}
{{- $percent := .root.Values.heapPercent | int }}
{{- if and $limit (gt $percent 0) (not (hasKey (.values.env | default dict) "NODE_OPTIONS")) }}
{{- printf "--max-old-space-size=%d" (divf (mulf (include "neatroots.memoryMiB" $limit | float64) $percent) 100 | floor | int) }}
{{- end }}
{{- end }}

{{/*
One service: its Deployment, Service, and when enabled its PodDisruptionBudget and
HorizontalPodAutoscaler. Takes (dict "root" $ "name" COMPONENT).
*/}}
{{- define "neatroots.workload" -}}
{{- $root := .root }}
{{- $name := .name }}
{{- $c := get (include "neatroots.components" $root | fromYaml) $name }}
{{- $v := get $root.Values $c.values }}
{{- $fullName := include "neatroots.componentName" (dict "root" $root "name" $name) }}
{{- $admin := dict "name" "admin" "port" $root.Values.ports.admin "appProtocol" "http" }}
{{- $ports := concat $c.ports (list $admin) }}
{{- $adminService := include "neatroots.adminServiceName" (dict "root" $root "name" $name) }}
{{- /* The admin port is on the service's own Service only when that stays inside the cluster. */}}
{{- $servicePorts := ternary $ports $c.ports (eq $adminService $fullName) }}
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ $fullName }}
  labels:
    {{- include "neatroots.labels" (dict "root" $root "name" $name) | nindent 4 }}
spec:
  {{- if not $v.autoscaling.enabled }}
  replicas: {{ $v.replicaCount }}
  {{- end }}
  revisionHistoryLimit: 5
  selector:
    matchLabels:
      {{- include "neatroots.selectorLabels" (dict "root" $root "name" $name) | nindent 6 }}
  strategy:
    type: RollingUpdate
    rollingUpdate:
      maxSurge: 1
      maxUnavailable: 0
  template:
    metadata:
      labels:
        {{- include "neatroots.selectorLabels" (dict "root" $root "name" $name) | nindent 8 }}
        app.kubernetes.io/part-of: neatroots
        {{- with $root.Values.podLabels }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
      annotations:
        checksum/config: {{ include (print $root.Template.BasePath "/configmap.yaml") $root | sha256sum }}
        {{- if not $root.Values.secrets.existingSecret }}
        checksum/secret: {{ include (print $root.Template.BasePath "/secret.yaml") $root | sha256sum }}
        {{- end }}
        {{- if $root.Values.metrics.podAnnotations }}
        prometheus.io/scrape: "true"
        prometheus.io/port: {{ $root.Values.ports.admin | quote }}
        prometheus.io/path: /metrics
        {{- end }}
        {{- with (merge (dict) ($v.podAnnotations | default dict) $root.Values.podAnnotations) }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
    spec:
      serviceAccountName: {{ include "neatroots.serviceAccountName" $root }}
      automountServiceAccountToken: false
      {{- with $root.Values.imagePullSecrets }}
      imagePullSecrets:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      securityContext:
        {{- toYaml $root.Values.podSecurityContext | nindent 8 }}
      terminationGracePeriodSeconds: {{ $v.terminationGracePeriodSeconds | default 30 }}
      containers:
        - name: {{ $name }}
          image: {{ include "neatroots.componentImage" (dict "root" $root "values" $v) | quote }}
          imagePullPolicy: {{ $root.Values.image.pullPolicy }}
          args: ["serve", "--target", {{ $name | quote }}]
          envFrom:
            - configMapRef:
                name: {{ include "neatroots.configMapName" $root }}
            - secretRef:
                name: {{ include "neatroots.secretName" $root }}
            {{- /* Postgres is the review service's alone: no other pod gets its URL and password. */}}
            {{- $pg := include "neatroots.postgresSecretName" $root }}
            {{- if and (eq $name "review") $pg }}
            - secretRef:
                name: {{ $pg }}
            {{- end }}
          {{- $nodeOptions := include "neatroots.nodeOptions" (dict "root" $root "values" $v) }}
          {{- if or $v.env $nodeOptions }}
          env:
            {{- if $nodeOptions }}
            # node's heap from the memory limit (heapPercent)
            - name: NODE_OPTIONS
              value: {{ $nodeOptions | quote }}
            {{- end }}
            {{- range $k, $val := $v.env }}
            - name: {{ $k }}
              value: {{ $val | toString | quote }}
            {{- end }}
          {{- end }}
          ports:
            {{- range $ports }}
            - name: {{ .name }}
              containerPort: {{ .port | int }}
              protocol: TCP
            {{- end }}
          startupProbe:
            httpGet:
              path: {{ $root.Values.probes.startup.path }}
              port: admin
            periodSeconds: {{ $root.Values.probes.startup.periodSeconds }}
            timeoutSeconds: {{ $root.Values.probes.startup.timeoutSeconds }}
            failureThreshold: {{ $root.Values.probes.startup.failureThreshold }}
          livenessProbe:
            httpGet:
              path: {{ $root.Values.probes.liveness.path }}
              port: admin
            initialDelaySeconds: {{ $root.Values.probes.liveness.initialDelaySeconds }}
            periodSeconds: {{ $root.Values.probes.liveness.periodSeconds }}
            timeoutSeconds: {{ $root.Values.probes.liveness.timeoutSeconds }}
            failureThreshold: {{ $root.Values.probes.liveness.failureThreshold }}
          readinessProbe:
            httpGet:
              path: {{ $root.Values.probes.readiness.path }}
              port: admin
            periodSeconds: {{ $root.Values.probes.readiness.periodSeconds }}
            timeoutSeconds: {{ $root.Values.probes.readiness.timeoutSeconds }}
            failureThreshold: {{ $root.Values.probes.readiness.failureThreshold }}
          resources:
            {{- toYaml $v.resources | nindent 12 }}
          securityContext:
            {{- toYaml $root.Values.securityContext | nindent 12 }}
          volumeMounts:
            - name: data
              mountPath: /data
            - name: tmp
              mountPath: /tmp
            {{- if $root.Values.checks }}
            - name: checks
              mountPath: /data/checks
              readOnly: true
            {{- end }}
      volumes:
        # NEATROOTS_HOME; the state of the distributed mode is in Kafka, Redis and PostgreSQL.
        - name: data
          emptyDir: {}
        - name: tmp
          emptyDir: {}
        {{- if $root.Values.checks }}
        - name: checks
          configMap:
            name: {{ include "neatroots.checksConfigMapName" $root }}
        {{- end }}
      {{- with ($v.nodeSelector | default $root.Values.nodeSelector) }}
      nodeSelector:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with ($v.tolerations | default $root.Values.tolerations) }}
      tolerations:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with ($v.affinity | default $root.Values.affinity) }}
      affinity:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $v.topologySpreadConstraints }}
      topologySpreadConstraints:
        {{- toYaml . | nindent 8 }}
      {{- end }}
---
apiVersion: v1
kind: Service
metadata:
  name: {{ $fullName }}
  labels:
    {{- include "neatroots.labels" (dict "root" $root "name" $name) | nindent 4 }}
  {{- with $v.service.annotations }}
  annotations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
spec:
  type: {{ $v.service.type }}
  selector:
    {{- include "neatroots.selectorLabels" (dict "root" $root "name" $name) | nindent 4 }}
  ports:
    {{- range $servicePorts }}
    - name: {{ .name }}
      port: {{ .port | int }}
      targetPort: {{ .name }}
      protocol: TCP
      appProtocol: {{ .appProtocol }}
    {{- end }}
{{- if ne $adminService $fullName }}
---
# The admin port (/healthz, /readyz, /metrics) inside the cluster only: the Service above is
# {{ $v.service.type }}, reachable from outside.
apiVersion: v1
kind: Service
metadata:
  name: {{ $adminService }}
  labels:
    {{- include "neatroots.labels" (dict "root" $root "name" $name) | nindent 4 }}
spec:
  type: ClusterIP
  selector:
    {{- include "neatroots.selectorLabels" (dict "root" $root "name" $name) | nindent 4 }}
  ports:
    - name: admin
      port: {{ $admin.port | int }}
      targetPort: admin
      protocol: TCP
      appProtocol: http
{{- end }}
{{- if $v.pdb.enabled }}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: {{ $fullName }}
  labels:
    {{- include "neatroots.labels" (dict "root" $root "name" $name) | nindent 4 }}
spec:
  {{- if hasKey $v.pdb "minAvailable" }}
  minAvailable: {{ $v.pdb.minAvailable }}
  {{- else }}
  maxUnavailable: {{ $v.pdb.maxUnavailable | default 1 }}
  {{- end }}
  selector:
    matchLabels:
      {{- include "neatroots.selectorLabels" (dict "root" $root "name" $name) | nindent 6 }}
{{- end }}
{{- if $v.autoscaling.enabled }}
---
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata:
  name: {{ $fullName }}
  labels:
    {{- include "neatroots.labels" (dict "root" $root "name" $name) | nindent 4 }}
spec:
  scaleTargetRef:
    apiVersion: apps/v1
    kind: Deployment
    name: {{ $fullName }}
  minReplicas: {{ $v.autoscaling.minReplicas }}
  maxReplicas: {{ $v.autoscaling.maxReplicas }}
  metrics:
    - type: Resource
      resource:
        name: cpu
        target:
          type: Utilization
          averageUtilization: {{ $v.autoscaling.targetCPUUtilizationPercentage }}
    {{- with $v.autoscaling.targetMemoryUtilizationPercentage }}
    - type: Resource
      resource:
        name: memory
        target:
          type: Utilization
          averageUtilization: {{ . }}
    {{- end }}
{{- end }}
{{- end }}
