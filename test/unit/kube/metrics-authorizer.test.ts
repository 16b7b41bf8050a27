import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { MetricsAuthorizer } from '../../../src/kube/metrics-authorizer.js';

/** A service cluster as the authorizer meets it: `prometheus` may get /metrics, `nobody` may not, anything else is no token. */
function apiServer(options: { slow?: Promise<void> } = {}) {
  const calls: string[] = [];
  const connection = {
    request: async <T>(method: string, path: string, request: { body?: unknown } = {}): Promise<T> => {
      calls.push(`${method} ${path}`);
      await options.slow;
      const body = request.body as { spec: { token?: string; user?: string } };
      if (path.includes('tokenreviews')) {
        const user = { prometheus: 'system:serviceaccount:monitoring:prometheus', nobody: 'system:serviceaccount:default:nobody' }[body.spec.token ?? ''];
        return { status: user ? { authenticated: true, user: { username: user } } : { authenticated: false } } as T;
      }
      return { status: { allowed: body.spec.user?.endsWith(':prometheus') === true } } as T;
    },
  };
  return { connection, calls };
}

describe('metrics authorizer: TokenReview and SubjectAccessReview, against a flood', () => {
  it('no token or an unknown one is 401, a user without the right 403, Prometheus allowed; answers are kept', async () => {
    const { connection, calls } = apiServer();
    const auth = new MetricsAuthorizer(connection);
    assert.equal((await auth.authorize(undefined))?.status, 401);
    assert.equal((await auth.authorize('Basic abc'))?.status, 401);
    assert.equal((await auth.authorize('Bearer made-up'))?.status, 401);
    assert.equal((await auth.authorize('Bearer nobody'))?.status, 403);
    assert.equal(await auth.authorize('Bearer prometheus'), undefined);
    const before = calls.length;
    assert.equal(await auth.authorize('Bearer prometheus'), undefined);
    assert.equal((await auth.authorize('Bearer nobody'))?.status, 403);
    assert.equal(calls.length, before, 'from memory');
  });

  it('made-up tokens cannot push Prometheus\'s answer out; concurrent requests with one token cost one review; beyond 4 reviews at once, 503 at once', async () => {
    let release!: () => void;
    const slow = new Promise<void>((r) => (release = r));
    const { connection, calls } = apiServer({ slow });
    const auth = new MetricsAuthorizer(connection);
    const same = Array.from({ length: 50 }, () => auth.authorize('Bearer prometheus'));
    const flood = Array.from({ length: 20 }, (_, i) => auth.authorize(`Bearer random-${i}`));
    // Three more reviews fit beside Prometheus's; the rest are turned away without waiting.
    const early = await Promise.race([Promise.all(flood.slice(3)), new Promise((r) => setTimeout(() => r('waited'), 50))]);
    assert.notEqual(early, 'waited');
    assert.ok((early as Array<{ status: number } | undefined>).every((d) => d?.status === 503));
    release();
    assert.ok((await Promise.all(same)).every((d) => d === undefined));
    assert.equal(calls.filter((c) => c.includes('tokenreviews')).length, 4, 'one review for the 50 requests of one token, three for the flood');
    for (let i = 0; i < 2000; i++) await auth.authorize(`Bearer flood-${i}`);
    const before = calls.length;
    assert.equal(await auth.authorize('Bearer prometheus'), undefined);
    assert.equal(calls.length, before, 'Prometheus\'s answer survived 2000 refusals');
  });

  it('an API server that cannot be asked is 503 with no detail, and not remembered', async () => {
    let fail = true;
    const warned: string[] = [];
    const auth = new MetricsAuthorizer({
      request: async <T>(): Promise<T> => {
        if (fail) throw new Error('secret internal detail: system:serviceaccount:relsync-system:relsync cannot create tokenreviews');
        return { status: { authenticated: true, allowed: true, user: { username: 'prometheus' } } } as T;
      },
    }, { warn: (_f, m) => void warned.push(m) });
    const refused = await auth.authorize('Bearer prometheus');
    assert.equal(refused?.status, 503);
    assert.doesNotMatch(refused!.message, /serviceaccount/);
    assert.equal(warned.length, 1, 'said to the operator');
    fail = false;
    assert.equal(await auth.authorize('Bearer prometheus'), undefined, 'asked again');
  });
});
