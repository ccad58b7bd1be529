// The function host's public surface: what a function and the command line need to serve it. The
// wire contract it speaks (event types, CloudEvents, keys, signing) is shared/wire's.

export {
  buildApp,
  buildMultiApp,
  buildMultiHost,
  defaultBodyLimit,
  defaultPressure,
  type AppOptions,
  type FunctionApp,
  type PressureOptions,
} from './app.ts';
export {
  errorCodes,
  errorReply,
  InvalidRequestError,
  OverloadedError,
  retryAfterSeconds,
  UnauthorizedError,
  type ErrorBody,
  type ErrorCode,
  type ErrorReply,
} from './errors.ts';
export type { Change, FunctionDefinition, ObjectKey, ObjectReport, ReconcileOptions, Report } from './function.ts';
export { createHostMetrics, durationBuckets, type HostMetrics } from './metrics.ts';
export {
  addProbeRoutes,
  buildProbeApp,
  createHostApp,
  defaultRequestTimeoutMs,
  type HostApp,
  type HostAppOptions,
  type ProbeOptions,
  type Readiness,
} from './probes.ts';
export type { LocalFunctions } from './local.ts';
export { defaultGraceMs, serve, type ServeOptions, type Serving } from './serve.ts';
export { ReplayGuard } from './replay.ts';
export { defaultMaxConcurrentRequests, memoryBudget, unconstrainedMemoryBytes } from './shedding.ts';
export type { AuthOptions } from '../wire/signing.ts';
