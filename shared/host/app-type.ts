// The type of every app the host builds, in a module of its own so that the modules that add to an
// app (./body.ts) and the one that creates it (./probes.ts) need not import each other.

import type {
  FastifyInstance,
  RawReplyDefaultExpression,
  RawRequestDefaultExpression,
  RawServerDefault,
} from 'fastify';
import type { Logger } from 'pino';

/** An app the host builds: a Fastify instance logging through a pino Logger. */
export type HostApp = FastifyInstance<RawServerDefault, RawRequestDefaultExpression, RawReplyDefaultExpression, Logger>;
