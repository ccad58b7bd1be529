// zod schemas for the Knative objects deploy/knative uses: serving.knative.dev/v1 Service,
// sources.knative.dev/v1 ApiServerSource and PingSource. The API server of the tests has no
// Knative CRDs, so these stand in for Knative's webhook validation, for the fields cirrus uses and
// the rules Knative applies to them (knative/serving pkg/apis/serving/k8s_validation.go,
// knative/eventing pkg/apis/sources/v1/*_validation.go). Objects are strict: an unknown or
// misspelt field is an error, as a field Knative would drop or reject should be.

import { z } from 'zod';

const dnsLabel = z
  .string()
  .regex(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/, 'must be a DNS label')
  .max(63);
const stringMap = z.record(z.string(), z.string());
const wholeNumber = z.string().regex(/^\d+$/, 'must be a whole number, quoted');
const quantity = z.string().regex(/^\d+(\.\d+)?(m|k|Ki|M|Mi|G|Gi)?$/, 'must be a Kubernetes quantity');

const metadata = z.strictObject({
  name: dnsLabel,
  namespace: dnsLabel,
  labels: stringMap.optional(),
  annotations: stringMap.optional(),
});

// The revision-template annotations Knative's autoscaler reads (knative docs, serving/autoscaling).
const autoscalingAnnotations: Readonly<Record<string, z.ZodType>> = {
  'autoscaling.knative.dev/class': z.enum(['kpa.autoscaling.knative.dev', 'hpa.autoscaling.knative.dev']),
  'autoscaling.knative.dev/metric': z.enum(['concurrency', 'rps', 'cpu', 'memory']),
  'autoscaling.knative.dev/target': wholeNumber,
  'autoscaling.knative.dev/target-utilization-percentage': wholeNumber,
  'autoscaling.knative.dev/min-scale': wholeNumber,
  'autoscaling.knative.dev/max-scale': wholeNumber,
  'autoscaling.knative.dev/initial-scale': wholeNumber,
  'autoscaling.knative.dev/activation-scale': wholeNumber,
  'autoscaling.knative.dev/scale-down-delay': z.string().regex(/^\d+(s|m|h)$/),
  'autoscaling.knative.dev/window': z.string().regex(/^\d+(s|m|h)$/),
};

const templateAnnotations = stringMap.superRefine((annotations, context) => {
  for (const [key, value] of Object.entries(annotations)) {
    if (!key.startsWith('autoscaling.knative.dev/')) continue;
    const schema = autoscalingAnnotations[key];
    if (schema === undefined)
      context.addIssue({ code: 'custom', path: [key], message: 'is not an autoscaling annotation Knative knows' });
    else if (!schema.safeParse(value).success)
      context.addIssue({ code: 'custom', path: [key], message: `invalid value ${JSON.stringify(value)}` });
  }
});

// Knative runs probes against the serving port: a port, if given, must be it. Given here, because
// Knative's published CRD schema (the port of core's HTTPGetAction) requires it.
const httpProbe = z.strictObject({
  httpGet: z.strictObject({ path: z.string().startsWith('/'), port: z.number().int().min(1).max(65535) }),
  periodSeconds: z.number().int().positive().optional(),
  failureThreshold: z.number().int().positive().optional(),
  timeoutSeconds: z.number().int().positive().optional(),
  // The runtime contract discourages delays: they add straight to every cold start.
  initialDelaySeconds: z.literal(0).optional(),
});

const envVar = z.strictObject({ name: z.string().regex(/^[A-Z_][A-Z0-9_]*$/), value: z.string() });
const envFrom = z.strictObject({
  configMapRef: z.strictObject({ name: dnsLabel, optional: z.boolean().optional() }),
});

// The container security context fields Knative accepts without feature flags.
const securityContext = z.strictObject({
  runAsNonRoot: z.boolean().optional(),
  runAsUser: z.number().int().optional(),
  runAsGroup: z.number().int().optional(),
  allowPrivilegeEscalation: z.boolean().optional(),
  readOnlyRootFilesystem: z.boolean().optional(),
  capabilities: z
    .strictObject({ drop: z.array(z.string()).optional(), add: z.array(z.literal('NET_BIND_SERVICE')).optional() })
    .optional(),
  seccompProfile: z.strictObject({ type: z.enum(['RuntimeDefault', 'Unconfined']) }).optional(),
});

// No subPath: a subPath mount never sees the kubelet's updates to the Secret behind it.
const volumeMount = z.strictObject({
  name: dnsLabel,
  mountPath: z.string().startsWith('/'),
  readOnly: z.boolean().optional(),
});

const resources = z.strictObject({
  requests: z.strictObject({ cpu: quantity.optional(), memory: quantity.optional() }).optional(),
  limits: z.strictObject({ cpu: quantity.optional(), memory: quantity.optional() }).optional(),
});

const container = z.strictObject({
  name: dnsLabel,
  image: z.string().min(1),
  args: z.array(z.string()).min(1),
  // Knative serves one port; its name picks the protocol (http1 or h2c).
  ports: z
    .array(z.strictObject({ name: z.enum(['http1', 'h2c']), containerPort: z.number().int().min(1).max(65535) }))
    .length(1),
  envFrom: z.array(envFrom).optional(),
  // Knative reserves PORT and the K_* variables: it sets them itself.
  env: z
    .array(envVar.refine((v) => v.name !== 'PORT' && !v.name.startsWith('K_'), 'PORT and K_* are reserved by Knative'))
    .optional(),
  readinessProbe: httpProbe,
  livenessProbe: httpProbe,
  resources,
  securityContext: securityContext.optional(),
  volumeMounts: z.array(volumeMount).optional(),
});

// Knative allows Secret, ConfigMap, projected and emptyDir volumes; cirrus uses the first two.
const volume = z
  .strictObject({
    name: dnsLabel,
    secret: z
      .strictObject({
        secretName: dnsLabel,
        optional: z.boolean().optional(),
        defaultMode: z.number().int().optional(),
      })
      .optional(),
    configMap: z.strictObject({ name: dnsLabel, optional: z.boolean().optional() }).optional(),
  })
  .refine((v) => (v.secret === undefined) !== (v.configMap === undefined), 'exactly one of secret or configMap');

/** A serving.knative.dev/v1 Service, as far as cirrus uses one. */
export const knativeServiceSchema = z.strictObject({
  apiVersion: z.literal('serving.knative.dev/v1'),
  kind: z.literal('Service'),
  metadata,
  spec: z.strictObject({
    template: z.strictObject({
      metadata: z.strictObject({ labels: stringMap.optional(), annotations: templateAnnotations }),
      spec: z.strictObject({
        serviceAccountName: dnsLabel,
        containerConcurrency: z.number().int().min(0).max(1000),
        // Knative's default max-revision-timeout-seconds.
        timeoutSeconds: z.number().int().min(1).max(600),
        enableServiceLinks: z.boolean().optional(),
        containers: z.array(container).length(1),
        volumes: z.array(volume).optional(),
      }),
    }),
  }),
});

/** A validated Knative Service. */
export type KnativeService = z.infer<typeof knativeServiceSchema>;

/** Where a source delivers: a Knative Service, optionally a path on it. */
const sink = z.strictObject({
  ref: z.strictObject({
    apiVersion: z.literal('serving.knative.dev/v1'),
    kind: z.literal('Service'),
    name: dnsLabel,
    namespace: dnsLabel.optional(),
  }),
  uri: z.string().startsWith('/').optional(),
});

/** A sources.knative.dev/v1 ApiServerSource, as far as cirrus uses one. */
export const apiServerSourceSchema = z.strictObject({
  apiVersion: z.literal('sources.knative.dev/v1'),
  kind: z.literal('ApiServerSource'),
  metadata,
  spec: z.strictObject({
    // The functions take either mode; Resource saves a read where the object is all they need.
    mode: z.enum(['Resource', 'Reference']),
    serviceAccountName: dnsLabel,
    resources: z
      .array(z.strictObject({ apiVersion: z.string(), kind: z.string(), selector: z.unknown().optional() }))
      .min(1),
    namespaceSelector: z.strictObject({ matchLabels: stringMap.optional() }).optional(),
    sink,
  }),
});

/**
 * A standard five-field cron schedule, as knative/eventing validates PingSource (robfig/cron's
 * ParseStandard, @every refused): no seconds field. Field syntax is checked loosely.
 */
const cronSchedule = z
  .string()
  .refine(
    (s) => !s.includes('@every') && s.trim().split(/\s+/).length === 5,
    'must be five cron fields (minute hour day month weekday)',
  );

/** A sources.knative.dev/v1 PingSource, as far as cirrus uses one. */
export const pingSourceSchema = z.strictObject({
  apiVersion: z.literal('sources.knative.dev/v1'),
  kind: z.literal('PingSource'),
  metadata,
  spec: z.strictObject({
    schedule: cronSchedule,
    contentType: z.literal('application/json'),
    data: z.string().refine((text) => {
      try {
        JSON.parse(text);
        return true;
      } catch {
        return false;
      }
    }, 'must be JSON (contentType is application/json)'),
    sink,
  }),
});

/** The number in a revision-template autoscaling annotation, or undefined when it is not set. */
export function scaleAnnotation(
  service: KnativeService,
  name: 'min-scale' | 'max-scale' | 'target' | 'initial-scale',
): number | undefined {
  const value = service.spec.template.metadata.annotations[`autoscaling.knative.dev/${name}`];
  return value === undefined ? undefined : Number(value);
}
