// The function host's public surface: what a function and the command line need to serve it.

export { buildApp, buildMultiApp, defaultBodyLimit, defaultPressure, type AppOptions, type FunctionApp, type PressureOptions } from './app.ts';
export {
  acceptedEventTypes,
  contentMode,
  eventMode,
  eventObjectKey,
  eventTypes,
  readCloudEvent,
  type CloudEvent,
  type ContentMode,
  type EventMode,
  type EventType,
  type ExtensionValue,
} from './cloudevents.ts';
export { errorReply, InvalidRequestError, retryAfterSeconds, type ErrorBody, type ErrorReply } from './errors.ts';
export { formatKey, type Change, type FunctionDefinition, type ObjectKey, type ObjectReport, type ReconcileOptions, type Report } from './function.ts';
export { createHostMetrics, durationBuckets, type HostMetrics } from './metrics.ts';
export { defaultGraceMs, serve, type ServeOptions, type Serving } from './serve.ts';
export { signatureHeader, signRequest, verifyRequest, type AuthOptions, type SignedRequest } from './auth.ts';
