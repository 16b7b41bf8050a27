import { pathSegments, withoutValues } from './status-message.js';

/** An error answer from a Kubernetes API server, with the parsed Status when there is one. */
export class ApiError extends Error {
  readonly statusCode: number;
  readonly reason: string | undefined;
  readonly retryAfterSeconds: number | undefined;
  /** The answer was a Kubernetes Status object (not, say, the plain "404 page not found" of a path no API serves). */
  readonly isStatus: boolean;
  /** The Status's details.name: which object the answer is about. */
  readonly detailsName: string | undefined;

  constructor(
    readonly method: string,
    readonly path: string,
    statusCode: number,
    body: string,
    /** The Retry-After header, which takes precedence over the Status's retryAfterSeconds. */
    retryAfterHeader?: number,
  ) {
    // An answer that is not a Status may be anything (an object echoed by a proxy or a webhook, a
    // Secret among it): its text never goes into logs, Events or the store, only a short plain line.
    let message = plainLine(body);
    const status = statusOf(body);
    const { reason, retryAfterSeconds, detailsName } = status ?? {};
    if (status?.message !== undefined) {
      // Names the path and the Status say anyway may be repeated; every other quoted value is left out.
      const known = pathSegments(path);
      if (detailsName !== undefined) known.add(detailsName);
      message = withoutValues(status.message, known);
    }
    super(`${method} ${path}: ${statusCode}${reason ? ` ${reason}` : ''}: ${message}`);
    this.name = 'ApiError';
    this.statusCode = statusCode;
    this.reason = reason;
    this.retryAfterSeconds = retryAfterHeader ?? retryAfterSeconds;
    this.isStatus = status !== undefined;
    this.detailsName = detailsName;
  }
}

export function isNotFound(err: unknown): boolean {
  return err instanceof ApiError && err.statusCode === 404;
}

/** What relsync reads of a Kubernetes Status answer; undefined when the text is not one. */
interface StatusRead {
  readonly reason: string | undefined;
  readonly retryAfterSeconds: number | undefined;
  readonly detailsName: string | undefined;
  readonly message: string | undefined;
}

function statusOf(body: string): StatusRead | undefined {
  let status: { kind?: unknown; message?: unknown; reason?: unknown; details?: { retryAfterSeconds?: unknown; name?: unknown } } | null;
  try {
    status = JSON.parse(body) as typeof status;
  } catch {
    return undefined; // not JSON: plainLine() says what may be said of it
  }
  if (status?.kind !== 'Status') return undefined;
  return {
    // A StatusReason is one word (NotFound, Conflict, ...); an API server that is a tenant's may send anything.
    reason: typeof status.reason === 'string' && /^[A-Za-z]{1,64}$/.test(status.reason) ? status.reason : undefined,
    retryAfterSeconds: typeof status.details?.retryAfterSeconds === 'number' ? status.details.retryAfterSeconds : undefined,
    detailsName: typeof status.details?.name === 'string' ? status.details.name : undefined,
    message: typeof status.message === 'string' ? status.message : undefined,
  };
}

/**
 * Whether an answer says that the object `name` does not exist, as isObjectNotFound would of the
 * ApiError made of it: for a read whose caller takes that as "absent", without the error (its
 * stack trace and message cost more than the read, thousands of times over for a tenant's wildcard
 * of names that do not exist).
 */
export function answersObjectNotFound(statusCode: number, body: string, name: string): boolean {
  if (statusCode !== 404) return false;
  const status = statusOf(body);
  return status?.reason === 'NotFound' && status.detailsName === name;
}

/**
 * The API server says this object does not exist: a 404 Status with reason NotFound about this
 * name. A 404 of the whole path (a type not served at the moment, a proxy, a kcp virtual workspace
 * that is not ready) is no proof that an object is gone, and deleting copies on it would lose them.
 */
export function isObjectNotFound(err: unknown, name: string): boolean {
  // The API server's NotFound of an object names it (apierrors.NewNotFound); one without a name is
  // about the path: "the server could not find the requested resource" of a type not served now.
  return err instanceof ApiError && err.statusCode === 404 && err.isStatus && err.reason === 'NotFound' && err.detailsName === name;
}

/**
 * A refusal that repeating the same request will not change until someone changes something: the
 * API server's own Status (not a proxy's line) saying the request is invalid (400, 422), forbidden
 * (403), not allowed (405) or too large or of a kind it does not take (413, 415). Not: a namespace
 * being terminated or a quota exceeded (403s that pass by themselves), a path not served (404: a
 * type on its way), a conflict, throttling, a timeout or credentials (401, which a rotation
 * settles). Retries of it may back off far (work-queue.ts); an outage's should not.
 */
export function isLastingRefusal(err: unknown): boolean {
  if (!(err instanceof ApiError) || !err.isStatus || ![400, 403, 405, 413, 415, 422].includes(err.statusCode)) return false;
  return !(err.statusCode === 403 && /being terminated|exceeded quota/.test(err.message));
}

export function isConflict(err: unknown): boolean {
  return err instanceof ApiError && err.statusCode === 409;
}

export function isAlreadyExists(err: unknown): boolean {
  return err instanceof ApiError && err.statusCode === 409 && err.reason === 'AlreadyExists';
}

export function isGone(err: unknown): boolean {
  return err instanceof ApiError && err.statusCode === 410;
}

export function isForbidden(err: unknown): boolean {
  return err instanceof ApiError && err.statusCode === 403;
}

/** The first line of a plain-text answer (`404 page not found`), or only its size when it looks like data. */
function plainLine(body: string): string {
  const line = body.split('\n', 1)[0]!.trim();
  if (line.length > 0 && line.length <= 120 && !/[{}[\]"<>]/.test(line)) return line;
  return `an answer of ${Buffer.byteLength(body)} bytes that is not a Kubernetes Status`;
}
