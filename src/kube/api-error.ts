/** An error answer from a Kubernetes API server, with the parsed Status when there is one. */
export class ApiError extends Error {
  readonly statusCode: number;
  readonly reason: string | undefined;
  readonly retryAfterSeconds: number | undefined;

  constructor(
    readonly method: string,
    readonly path: string,
    statusCode: number,
    body: string,
    /** The Retry-After header, which takes precedence over the Status's retryAfterSeconds. */
    retryAfterHeader?: number,
  ) {
    let message = body.slice(0, 500);
    let reason: string | undefined;
    let retryAfterSeconds: number | undefined;
    try {
      const status = JSON.parse(body) as { message?: string; reason?: string; details?: { retryAfterSeconds?: number } };
      message = status.message ?? message;
      reason = status.reason;
      retryAfterSeconds = status.details?.retryAfterSeconds;
    } catch {
      // not a Status object: keep the raw text
    }
    super(`${method} ${path}: ${statusCode}${reason ? ` ${reason}` : ''}: ${message}`);
    this.name = 'ApiError';
    this.statusCode = statusCode;
    this.reason = reason;
    this.retryAfterSeconds = retryAfterHeader ?? retryAfterSeconds;
  }
}

export function isNotFound(err: unknown): boolean {
  return err instanceof ApiError && err.statusCode === 404;
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
