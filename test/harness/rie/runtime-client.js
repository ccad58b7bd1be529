// A Lambda runtime client for the tests and the bench that run a packaged function under AWS's
// Runtime Interface Emulator (tools/rie/, ./rie.ts): what Lambda's managed nodejs24.x runtime does
// for a handler, in a loop over the Runtime API (plain HTTP, no native build). It is not shipped:
// on Lambda the managed runtime loads the handler itself (ADR 0033).
//
//   node runtime-client.js <handler>    e.g. dist/functions/<name>/lambda.handler
//
// It imports `<LAMBDA_TASK_ROOT>/<module>.js` (or .mjs, .cjs) and takes its export; a failure to
// load is posted to /runtime/init/error and the process exits 1, as the managed runtime does. Then,
// one event at a time: GET /runtime/invocation/next, call the handler, POST its result to
// /response or its error to /error (Runtime API 2018-06-01). It installs no signal handler, so a
// SIGTERM at shutdown does what the handler's own code makes of it (Node's default: exit).
//
// JavaScript, not TypeScript: the managed runtime never loads Node's type stripper, and neither
// may the client, or a cold start measured under the emulator would carry it.

import { existsSync } from 'node:fs';
import { Agent, request } from 'node:http';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

const [host = '127.0.0.1', port = '9001'] = (process.env['AWS_LAMBDA_RUNTIME_API'] ?? '').split(':');
const agent = new Agent({ keepAlive: true, maxSockets: 1 });

/**
 * @typedef {{ status: number, headers: import('node:http').IncomingHttpHeaders, body: Buffer }} Answer
 * @typedef {(event: unknown, context: object) => Promise<unknown>} Handler
 */

/**
 * One request to the Runtime API.
 * @param {string} method
 * @param {string} path
 * @param {string} [body]
 * @param {Record<string, string>} [headers]
 * @returns {Promise<Answer>}
 */
function call(method, path, body, headers = {}) {
  return new Promise((resolve, reject) => {
    const options = { host, port: Number(port), method, path: `/2018-06-01/runtime${path}`, agent, headers };
    const req = request(options, (res) => {
      /** @type {Buffer[]} */
      const chunks = [];
      res.on('data', (/** @type {Buffer} */ chunk) => chunks.push(chunk));
      res.on('error', reject);
      res.on('end', () => {
        resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) });
      });
    });
    req.on('error', reject);
    req.end(body);
  });
}

/**
 * The Runtime API's error body.
 * @param {unknown} error
 * @returns {string}
 */
function errorBody(error) {
  const err = error instanceof Error ? error : new Error(String(error));
  return JSON.stringify({
    errorType: err.name,
    errorMessage: err.message,
    stackTrace: (err.stack ?? '')
      .split('\n')
      .slice(1)
      .map((line) => line.trim()),
  });
}

/**
 * @param {string} path
 * @param {string} body
 * @param {string} [errorType]
 * @returns {Promise<Answer>}
 */
function post(path, body, errorType) {
  /** @type {Record<string, string>} */
  const headers = { 'content-type': 'application/json' };
  if (errorType !== undefined) headers['lambda-runtime-function-error-type'] = errorType;
  return call('POST', path, body, headers);
}

/**
 * The handler `spec` (`<module>.<export>`) names, under the task root.
 * @param {string} spec
 * @returns {Promise<Handler>}
 */
async function loadHandler(spec) {
  const dot = spec.lastIndexOf('.');
  if (dot <= 0) throw new Error(`bad handler '${spec}': expected <module>.<export>`);
  const root = process.env['LAMBDA_TASK_ROOT'] ?? process.cwd();
  const base = join(root, spec.slice(0, dot));
  const file = ['.js', '.mjs', '.cjs'].map((ext) => base + ext).find((f) => existsSync(f));
  if (file === undefined) throw new Error(`no module ${spec.slice(0, dot)}(.js|.mjs|.cjs) in ${root}`);
  /** @type {Record<string, unknown>} */
  const module = await import(pathToFileURL(file).href).then((/** @type {Record<string, unknown>} */ m) => m);
  const handler = module[spec.slice(dot + 1)];
  if (typeof handler !== 'function') throw new Error(`${file} exports no function ${spec.slice(dot + 1)}`);
  return /** @type {Handler} */ (handler);
}

/**
 * The handler's context, from the invocation's headers and the function's environment.
 * @param {import('node:http').IncomingHttpHeaders} headers
 * @returns {object}
 */
function contextOf(headers) {
  const deadline = Number(headers['lambda-runtime-deadline-ms']);
  const env = process.env;
  return {
    callbackWaitsForEmptyEventLoop: true,
    functionName: env['AWS_LAMBDA_FUNCTION_NAME'],
    functionVersion: env['AWS_LAMBDA_FUNCTION_VERSION'] ?? '$LATEST',
    invokedFunctionArn: headers['lambda-runtime-invoked-function-arn'],
    memoryLimitInMB: env['AWS_LAMBDA_FUNCTION_MEMORY_SIZE'],
    awsRequestId: headers['lambda-runtime-aws-request-id'],
    logGroupName: env['AWS_LAMBDA_LOG_GROUP_NAME'],
    logStreamName: env['AWS_LAMBDA_LOG_STREAM_NAME'],
    getRemainingTimeInMillis: () => deadline - Date.now(),
  };
}

/** @param {unknown} error */
function report(error) {
  process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
}

/** @type {Handler} */
let handler;
try {
  handler = await loadHandler(process.argv[2] ?? process.env['_HANDLER'] ?? '');
} catch (error) {
  report(error);
  await post('/init/error', errorBody(error), 'Runtime.ImportModuleError');
  process.exit(1);
}

for (;;) {
  const next = await call('GET', '/invocation/next');
  const id = String(next.headers['lambda-runtime-aws-request-id']);
  /** @type {unknown} */
  let result;
  try {
    result = await handler(JSON.parse(next.body.toString('utf8')), contextOf(next.headers));
  } catch (error) {
    report(error);
    await post(`/invocation/${id}/error`, errorBody(error), 'Runtime.HandlerError');
    continue;
  }
  await post(`/invocation/${id}/response`, JSON.stringify(result ?? null));
}
