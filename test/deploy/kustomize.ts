// Builds deploy/'s kustomizations in-process, for tests that must run without kubectl: the subset of
// kustomize those files use (resources, ConfigMap and Secret generators with fixed names, images,
// patch files that add annotations or labels to an object or set a Deployment's pod dnsPolicy,
// inline JSON patches of `add` and `replace` on the objects a target selects, and a nameSuffix over
// ServiceAccounts, RBAC and Knative Services with the references kustomize renames), and an error
// for anything else, so that this loader can never silently read a
// kustomization differently from kustomize. manifests.test.ts compares it with `kubectl kustomize`
// where kubectl is installed.

import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { basename, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { load, loadAll } from 'js-yaml';
import { z } from 'zod';

/** deploy/knative in this checkout. */
export const knativeRoot = fileURLToPath(new URL('../../deploy/knative/', import.meta.url));

/** deploy/standalone in this checkout. */
export const standaloneRoot = fileURLToPath(new URL('../../deploy/standalone/', import.meta.url));

/** A Kubernetes object as the YAML gives it. */
export interface KubeObject {
  readonly apiVersion: string;
  readonly kind: string;
  readonly metadata: {
    readonly name: string;
    readonly namespace?: string;
    readonly labels?: Record<string, string>;
    readonly [key: string]: unknown;
  };
  readonly [key: string]: unknown;
}

const objectSchema = z.looseObject({
  apiVersion: z.string().min(1),
  kind: z.string().min(1),
  metadata: z.looseObject({ name: z.string().min(1), namespace: z.string().min(1).optional() }),
});

const generatorSchema = z.strictObject({
  name: z.string(),
  namespace: z.string().optional(),
  behavior: z.enum(['create', 'merge', 'replace']).optional(),
  literals: z.array(z.string().regex(/^[^=]+=/, 'KEY=value')).optional(),
  files: z.array(z.string()).optional(),
});

// A patch's target: objects by group, kind and name (an exact name here; kustomize takes a regex).
const targetSchema = z.strictObject({
  group: z.string().optional(),
  kind: z.string().optional(),
  name: z
    .string()
    .regex(/^[a-z0-9.-]+$/)
    .optional(),
});

// A JSON patch's operations that the overlays use: add (`-` appends to an array) and replace.
const jsonPatchSchema = z.array(
  z.strictObject({ op: z.enum(['add', 'replace']), path: z.string().startsWith('/'), value: z.unknown() }),
);

// A configurations file: ServiceAccount references in more kinds than kustomize knows.
const configurationsSchema = z.strictObject({
  nameReference: z.array(
    z.strictObject({
      kind: z.literal('ServiceAccount'),
      fieldSpecs: z.array(z.strictObject({ path: z.string(), group: z.string().optional(), kind: z.string() })),
    }),
  ),
});

const kustomizationSchema = z.strictObject({
  apiVersion: z.literal('kustomize.config.k8s.io/v1beta1'),
  kind: z.literal('Kustomization'),
  resources: z.array(z.string()).optional(),
  images: z
    .array(z.strictObject({ name: z.string(), newName: z.string().optional(), newTag: z.string().optional() }))
    .optional(),
  // Hashed names would need every reference rewritten; these kustomizations do not use them.
  generatorOptions: z
    .strictObject({ disableNameSuffixHash: z.literal(true), labels: z.record(z.string(), z.string()).optional() })
    .optional(),
  configMapGenerator: z.array(generatorSchema).optional(),
  secretGenerator: z.array(generatorSchema).optional(),
  // Strategic-merge patch files: the aws overlays annotate ServiceAccounts with their IAM roles,
  // deploy/lambda sets the relay's dnsPolicy. Inline JSON patches (RFC 6902) on a target: the hybrid
  // overlay's per-provider environment.
  patches: z
    .array(z.union([z.strictObject({ path: z.string() }), z.strictObject({ target: targetSchema, patch: z.string() })]))
    .optional(),
  // The hybrid overlay's per-provider copies of the functions (knative/overlays/hybrid/static, aws).
  nameSuffix: z
    .string()
    .regex(/^-[a-z0-9-]+$/)
    .optional(),
  // Files of further name references (only ServiceAccount ones: a Knative Service's serviceAccountName).
  configurations: z.array(z.string()).optional(),
});

// What a patch file may do: add annotations or labels to an object of the build...
const metadataPatchSchema = z.strictObject({
  apiVersion: z.string(),
  kind: z.string(),
  metadata: z.strictObject({
    name: z.string(),
    namespace: z.string().optional(),
    annotations: z.record(z.string(), z.string()).optional(),
    labels: z.record(z.string(), z.string()).optional(),
  }),
});

// ...or set a Deployment's pod dnsPolicy.
const dnsPolicyPatchSchema = z.strictObject({
  apiVersion: z.literal('apps/v1'),
  kind: z.literal('Deployment'),
  metadata: z.strictObject({ name: z.string(), namespace: z.string().optional() }),
  spec: z.strictObject({
    template: z.strictObject({
      spec: z.strictObject({ dnsPolicy: z.enum(['Default', 'ClusterFirst', 'ClusterFirstWithHostNet', 'None']) }),
    }),
  }),
});

type Kustomization = z.infer<typeof kustomizationSchema>;
type Generator = z.infer<typeof generatorSchema>;

/** How to read the files a generator names (a test supplies files that are generated per cluster). */
export interface BuildOptions {
  readonly readFile?: (path: string) => string;
}

/** `Kind/namespace/name`: an object's identity within a build. */
export function identity(object: KubeObject): string {
  return `${object.kind}/${object.metadata.namespace ?? ''}/${object.metadata.name}`;
}

/** Every object of the YAML file at `path`, validated as Kubernetes objects. */
export function readObjects(path: string): KubeObject[] {
  return loadAll(readFileSync(path, 'utf8'))
    .filter((document) => document !== null && document !== undefined)
    .map((document, index) => {
      const parsed = objectSchema.safeParse(document);
      if (!parsed.success)
        throw new Error(`${path}, document ${index + 1}: not a Kubernetes object: ${parsed.error.message}`);
      return parsed.data as KubeObject;
    });
}

/** Reads and validates the kustomization.yaml in `dir`. */
export function readKustomization(dir: string): Kustomization {
  const path = join(dir, 'kustomization.yaml');
  const [document] = loadAll(readFileSync(path, 'utf8'));
  const parsed = kustomizationSchema.safeParse(document);
  if (!parsed.success)
    throw new Error(`${path}: uses what this loader does not support, or is invalid: ${parsed.error.message}`);
  return parsed.data;
}

/** The objects `kustomize build dir` emits (in resource order, not kustomize's kind order). */
export function build(dir: string, options: BuildOptions = {}): KubeObject[] {
  const kustomization = readKustomization(dir);
  const objects = (kustomization.resources ?? []).flatMap((resource) => {
    const path = join(dir, resource);
    return statSync(path).isDirectory() ? build(path, options) : readObjects(path);
  });
  generateAll(objects, kustomization, dir, options);
  checkUnique(objects, dir);
  // kustomize's order: patches, then the name suffix (and the references it renames), then images.
  applyPatches(objects, dir, kustomization.patches ?? []);
  const suffixed =
    kustomization.nameSuffix === undefined
      ? objects
      : withSuffix(objects, kustomization.nameSuffix, extraServiceAccountRefs(dir, kustomization.configurations ?? []));
  return suffixed.map((object) => withImages(object, kustomization.images ?? []));
}

function generateAll(objects: KubeObject[], kustomization: Kustomization, dir: string, options: BuildOptions): void {
  const readFile = options.readFile ?? ((path: string) => readFileSync(path, 'utf8'));
  const labels = kustomization.generatorOptions?.labels ?? {};
  for (const generator of kustomization.configMapGenerator ?? [])
    generate(objects, configMap(generator, { dir, readFile, labels }), generator.behavior);
  for (const generator of kustomization.secretGenerator ?? [])
    generate(objects, secret(generator, { dir, readFile, labels }), generator.behavior);
}

function applyPatches(objects: KubeObject[], dir: string, patches: NonNullable<Kustomization['patches']>): void {
  for (const patch of patches) {
    if ('path' in patch) {
      for (const document of readObjects(join(dir, patch.path))) applyPatch(objects, document, join(dir, patch.path));
      continue;
    }
    const operations = jsonPatchSchema.parse(load(patch.patch));
    const targets = objects.flatMap((object, at) => (selects(patch.target, object) ? [at] : []));
    if (targets.length === 0)
      throw new Error(`${dir}: a patch's target selects nothing: ${JSON.stringify(patch.target)}`);
    for (const at of targets) {
      const copy = structuredClone(objects[at]) as KubeObject;
      for (const operation of operations) applyOperation(copy, operation, `${dir}: ${identity(copy)}`);
      objects[at] = copy;
    }
  }
}

function groupOf(object: KubeObject): string {
  return object.apiVersion.includes('/') ? (object.apiVersion.split('/')[0] ?? '') : '';
}

function selects(target: z.infer<typeof targetSchema>, object: KubeObject): boolean {
  return (
    (target.group === undefined || target.group === groupOf(object)) &&
    (target.kind === undefined || target.kind === object.kind) &&
    (target.name === undefined || target.name === object.metadata.name)
  );
}

// RFC 6902 add and replace on `object`, in place: add to an object member or into an array (`-`
// appends); replace what exists.
function applyOperation(object: KubeObject, operation: z.infer<typeof jsonPatchSchema>[number], where: string): void {
  const keys = operation.path
    .slice(1)
    .split('/')
    .map((key) => key.replaceAll('~1', '/').replaceAll('~0', '~'));
  const last = keys.pop() ?? '';
  const parent = keys.reduce<unknown>((at, key) => (at as Record<string, unknown> | undefined)?.[key], object);
  if (parent === null || typeof parent !== 'object') throw new Error(`${where}: ${operation.path}: no such path`);
  const replace = operation.op === 'replace';
  if (Array.isArray(parent)) {
    spliceAt(parent, last, { replace, value: operation.value }, `${where}: ${operation.path}`);
    return;
  }
  const members = parent as Record<string, unknown>;
  if (replace && !(last in members)) throw new Error(`${where}: ${operation.path}: nothing to replace`);
  members[last] = operation.value;
}

// Adds `value` into `array` at `key` (`-`: at the end), or replaces the item there.
function spliceAt(
  array: unknown[],
  key: string,
  { replace, value }: { replace: boolean; value: unknown },
  where: string,
): void {
  const index = key === '-' ? array.length : Number(key);
  const end = replace ? array.length - 1 : array.length;
  if (!Number.isInteger(index) || index < 0 || index > end) throw new Error(`${where}: no such index`);
  array.splice(index, replace ? 1 : 0, value);
}

// The kinds withSuffix renames, and whose references to each other it follows; anything else refused.
const suffixedKinds = ['ServiceAccount', 'ClusterRole', 'ClusterRoleBinding', 'Role', 'RoleBinding'];

/** The extra places (`kind`, `group`, path) where a ServiceAccount is referred to, from configurations files. */
function extraServiceAccountRefs(
  dir: string,
  files: readonly string[],
): { kind: string; group: string; path: string[] }[] {
  return files.flatMap((file) =>
    configurationsSchema
      .parse(load(readFileSync(join(dir, file), 'utf8')))
      .nameReference.flatMap((ref) =>
        ref.fieldSpecs.map((spec) => ({ kind: spec.kind, group: spec.group ?? '', path: spec.path.split('/') })),
      ),
  );
}

// nameSuffix as kustomize applies it: every object renamed, then the references among them (a
// binding's roleRef and ServiceAccount subjects, and the configured ServiceAccount fields) renamed
// with what they refer to.
function withSuffix(
  objects: readonly KubeObject[],
  suffix: string,
  serviceAccountRefs: readonly { kind: string; group: string; path: string[] }[],
): KubeObject[] {
  const renamed = new Map<string, string>();
  for (const object of objects) {
    const referrer = serviceAccountRefs.some((r) => r.kind === object.kind && r.group === groupOf(object));
    if (!suffixedKinds.includes(object.kind) && !referrer)
      throw new Error(`nameSuffix: ${identity(object)}: this loader does not know what refers to a ${object.kind}`);
    renamed.set(identity(object), object.metadata.name + suffix);
  }
  const newName = (kind: string, namespace: string, name: string): string =>
    renamed.get(`${kind}/${namespace}/${name}`) ?? name;
  return objects.map((original) => {
    const object = structuredClone(original) as KubeObject & Record<string, unknown>;
    (object.metadata as { name: string }).name = original.metadata.name + suffix;
    renameBindingRefs(object, newName);
    for (const ref of serviceAccountRefs.filter((r) => r.kind === object.kind && r.group === groupOf(object)))
      renameField(object, ref.path, (name) => newName('ServiceAccount', object.metadata.namespace ?? '', name));
    return object;
  });
}

type NewName = (kind: string, namespace: string, name: string) => string;

// A binding's roleRef and ServiceAccount subjects, in place.
function renameBindingRefs(object: Record<string, unknown> & KubeObject, newName: NewName): void {
  if (object.kind !== 'RoleBinding' && object.kind !== 'ClusterRoleBinding') return;
  const namespace = object.metadata.namespace ?? '';
  const roleRef = object['roleRef'] as { kind: string; name: string };
  roleRef.name = newName(roleRef.kind, roleRef.kind === 'Role' ? namespace : '', roleRef.name);
  for (const subject of (object['subjects'] ?? []) as { kind: string; name: string; namespace?: string }[])
    if (subject.kind === 'ServiceAccount')
      subject.name = newName('ServiceAccount', subject.namespace ?? namespace, subject.name);
}

// The string at `path` in `object`, in place, where there is one.
function renameField(object: Record<string, unknown>, path: readonly string[], rename: (name: string) => string): void {
  const keys = [...path];
  const last = keys.pop() ?? '';
  const parent = keys.reduce<Record<string, unknown> | undefined>(
    (at, key) => at?.[key] as Record<string, unknown> | undefined,
    object,
  );
  const value = parent?.[last];
  if (parent !== undefined && typeof value === 'string') parent[last] = rename(value);
}

// Merges the annotations and labels of `document` (a patch from `file`) into its object in
// `objects`, or sets the pod dnsPolicy of a Deployment; anything else is an error.
function applyPatch(objects: KubeObject[], document: KubeObject, file: string): void {
  const at = objects.findIndex((o) => identity(o) === identity(document) && o.apiVersion === document.apiVersion);
  const target = objects[at];
  if (target === undefined) throw new Error(`${file}: ${identity(document)}: not in the build`);
  const dns = dnsPolicyPatchSchema.safeParse(document);
  if (dns.success) {
    const spec = target['spec'] as { template: { spec: Record<string, unknown> } };
    const template = { ...spec.template, spec: { ...spec.template.spec, ...dns.data.spec.template.spec } };
    objects[at] = { ...target, spec: { ...spec, template } };
    return;
  }
  const parsed = metadataPatchSchema.safeParse(document);
  if (!parsed.success)
    throw new Error(
      `${file}: ${identity(document)}: only annotations and labels, or a Deployment's dnsPolicy: ${parsed.error.message}`,
    );
  const metadata: Record<string, unknown> = { ...target.metadata };
  // As kustomize merges them: an empty map adds nothing, not even the key.
  for (const key of ['annotations', 'labels'] as const) {
    const merged = { ...(target.metadata[key] as Record<string, string> | undefined), ...parsed.data.metadata[key] };
    if (Object.keys(merged).length > 0) metadata[key] = merged;
  }
  objects[at] = { ...target, metadata: metadata as KubeObject['metadata'] };
}

function checkUnique(objects: readonly KubeObject[], dir: string): void {
  const seen = new Set<string>();
  for (const object of objects) {
    const id = identity(object);
    if (seen.has(id)) throw new Error(`${dir}: ${id} is defined twice`);
    seen.add(id);
  }
}

interface GeneratorContext {
  readonly dir: string;
  readonly readFile: (path: string) => string;
  readonly labels: Readonly<Record<string, string>>;
}

// key=value pairs of a generator: literals, then files (`key=path` or `path`, keyed by its name).
function generatedData(generator: Generator, context: GeneratorContext): Record<string, string> {
  const data: Record<string, string> = {};
  for (const literal of generator.literals ?? []) {
    const at = literal.indexOf('=');
    data[literal.slice(0, at)] = literal.slice(at + 1);
  }
  for (const file of generator.files ?? []) {
    const at = file.indexOf('=');
    const [key, path] = at < 0 ? [basename(file), file] : [file.slice(0, at), file.slice(at + 1)];
    data[key] = context.readFile(join(context.dir, path));
  }
  return data;
}

function metadataOf(generator: Generator, labels: Readonly<Record<string, string>>): KubeObject['metadata'] {
  const base =
    generator.namespace === undefined
      ? { name: generator.name }
      : { name: generator.name, namespace: generator.namespace };
  return Object.keys(labels).length === 0 ? base : { ...base, labels: { ...labels } };
}

function configMap(generator: Generator, context: GeneratorContext): KubeObject {
  return {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: metadataOf(generator, context.labels),
    data: generatedData(generator, context),
  };
}

// As kustomize writes it: base64 `data`, type Opaque.
function secret(generator: Generator, context: GeneratorContext): KubeObject {
  const data = Object.fromEntries(
    Object.entries(generatedData(generator, context)).map(([key, value]) => [
      key,
      Buffer.from(value).toString('base64'),
    ]),
  );
  return { apiVersion: 'v1', kind: 'Secret', metadata: metadataOf(generator, context.labels), type: 'Opaque', data };
}

// create: a new object; merge: its data and labels over the existing object's; replace: instead of it.
function generate(objects: KubeObject[], generated: KubeObject, behavior: Generator['behavior']): void {
  const index = objects.findIndex((object) => identity(object) === identity(generated));
  if ((behavior ?? 'create') === 'create') {
    if (index >= 0)
      throw new Error(`generator ${identity(generated)}: already defined (use behavior merge or replace)`);
    objects.push(generated);
    return;
  }
  const existing = objects[index];
  if (existing === undefined)
    throw new Error(
      `generator ${identity(generated)}: behavior ${String(behavior)} but there is no such object to change`,
    );
  objects[index] =
    behavior === 'replace'
      ? { ...generated, metadata: { ...existing.metadata, ...generated.metadata } }
      : merged(existing, generated);
}

function merged(existing: KubeObject, generated: KubeObject): KubeObject {
  const labels = { ...existing.metadata.labels, ...generated.metadata.labels };
  const data = {
    ...(existing['data'] as Record<string, string> | undefined),
    ...(generated['data'] as Record<string, string>),
  };
  return { ...existing, metadata: { ...existing.metadata, labels }, data };
}

interface Container {
  image?: string;
  [key: string]: unknown;
}

// The images transformer, for the pod templates these files have (Deployments, Knative Services).
function withImages(object: KubeObject, images: Kustomization['images'] & object): KubeObject {
  const template = (object['spec'] as { template?: { spec?: { containers?: Container[] } } } | undefined)?.template;
  const containers = template?.spec?.containers;
  if (containers === undefined || images.length === 0) return object;
  const copy = structuredClone(object) as KubeObject & { spec: { template: { spec: { containers: Container[] } } } };
  for (const container of copy.spec.template.spec.containers) {
    const image = images.find((i) => i.name === container.image);
    if (image !== undefined)
      container.image = `${image.newName ?? image.name}${image.newTag === undefined ? '' : `:${image.newTag}`}`;
  }
  return copy;
}

/** Every kustomization directory under `root` (those with a kustomization.yaml). */
export function kustomizationDirs(root: string = knativeRoot): string[] {
  const found = existsSync(join(root, 'kustomization.yaml')) ? [root] : [];
  for (const entry of readdirSync(root, { withFileTypes: true })) {
    if (entry.isDirectory()) found.push(...kustomizationDirs(join(root, entry.name)));
  }
  return found;
}

/** Every file a kustomization under `root` names (resources, generator files, patches), relative to `root`. */
export function referencedFiles(root: string = knativeRoot): Set<string> {
  const files = new Set<string>();
  for (const dir of kustomizationDirs(root)) {
    files.add(relative(root, join(dir, 'kustomization.yaml')));
    for (const path of namedFiles(readKustomization(dir))) {
      if (!existsSync(join(dir, path)) || !statSync(join(dir, path)).isDirectory())
        files.add(relative(root, join(dir, path)));
    }
  }
  return files;
}

// The paths a kustomization names: resources, generator files, patch files, configurations.
function namedFiles(kustomization: Kustomization): string[] {
  const generated = [...(kustomization.configMapGenerator ?? []), ...(kustomization.secretGenerator ?? [])]
    .flatMap((g) => g.files ?? [])
    .map((file) => file.slice(file.indexOf('=') + 1));
  const patches = (kustomization.patches ?? []).flatMap((p) => ('path' in p ? [p.path] : []));
  return [...(kustomization.resources ?? []), ...generated, ...patches, ...(kustomization.configurations ?? [])];
}
