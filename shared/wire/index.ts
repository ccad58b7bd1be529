// The wire contract between the relay (the sender) and the functions' host (the receiver),
// docs/http-contract.md: event types and extension names, CloudEvents over HTTP, object
// keys and subjects, error replies, and request signing. Neither side's HTTP machinery is here.

export {
  acceptedEventTypes,
  eventMode,
  eventTypes,
  extensionNames,
  formatBudget,
  parseBudget,
  triggerSource,
  type EventMode,
  type EventType,
} from './types.ts';
export {
  attributeHeaderPrefix,
  binaryModeHeaders,
  contentMode,
  formatIssue,
  readCloudEvent,
  type CloudEvent,
  type ContentMode,
  type ExtensionValue,
} from './cloudevents.ts';
export { eventObjectKey, formatKey, objectSubject, type ObjectKey } from './keys.ts';
export {
  cloudCallsHeader,
  errorCodes,
  InvalidRequestError,
  parseErrorBody,
  readErrorBody,
  type ErrorBody,
  type ErrorCode,
} from './replies.ts';
export {
  bodyDigest,
  defaultClockSkewSeconds,
  defaultToleranceSeconds,
  signatureHeader,
  signedHeaderPrefix,
  signRequest,
  unixNow,
  verifyRequest,
  verifySignatureHeader,
  type AuthOptions,
  type SignedRequest,
  type Verification,
} from './signing.ts';
export type { LocalHandler, LocalReply } from './local.ts';
