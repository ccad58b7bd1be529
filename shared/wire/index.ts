// The wire contract between the relay (the sender) and the functions' host (the receiver),
// DESIGN.md "The event contract": event types and extension names, CloudEvents over HTTP, object
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
export { cloudCallsHeader, InvalidRequestError, parseErrorBody, type ErrorBody } from './replies.ts';
export {
  defaultToleranceSeconds,
  signatureHeader,
  signedHeaderPrefix,
  signRequest,
  unixNow,
  verifyRequest,
  type AuthOptions,
  type SignedRequest,
  type Verification,
} from './signing.ts';
