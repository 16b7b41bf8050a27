import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { MetricsAuthorizer } from '../../../src/kube/metrics-authorizer.js';
import { clockReading } from '../../harness/fake-clock.js';

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
    const flood = Array.from({ length: 20 }, (_, i) => auth.authorize(`Bearer random-${i}`, `10.0.0.${i}`));
    // Three more reviews fit beside Prometheus's; the rest are turned away without waiting.
    const early = await Promise.race([Promise.all(flood.slice(3)), new Promise((r) => setTimeout(() => r('waited'), 50))]);
    assert.notEqual(early, 'waited');
    assert.ok((early as Array<{ status: number } | undefined>).every((d) => d?.status === 503));
    release();
    assert.ok((await Promise.all(same)).every((d) => d === undefined));
    assert.equal(calls.filter((c) => c.includes('tokenreviews')).length, 4, 'one review for the 50 requests of one token, three for the flood');
    for (let i = 0; i < 2000; i++) await auth.authorize(`Bearer flood-${i}`, `10.1.${i >> 8}.${i & 255}`);
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
    }, { logger: { warn: (_f: object, m: string) => void warned.push(m) } });
    const refused = await auth.authorize('Bearer prometheus');
    assert.equal(refused?.status, 503);
    assert.doesNotMatch(refused!.message, /serviceaccount/);
    assert.equal(warned.length, 1, 'said to the operator');
    fail = false;
    assert.equal(await auth.authorize('Bearer prometheus'), undefined, 'asked again');
  });

  it('a token allowed before is asked about again in a lane of its own: a flood of made-up tokens from many sources does not refuse it', async () => {
    let now = 0;
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const { connection, calls } = apiServer();
    const held = {
      request: async <T>(method: string, path: string, request: { body?: unknown } = {}): Promise<T> => {
        const body = request.body as { spec: { token?: string } };
        // Made-up tokens hang until the test lets them go, as reviews an API server is slow to answer.
        if (body.spec.token?.startsWith('random-')) await gate;
        return connection.request<T>(method, path, request);
      },
    };
    const auth = new MetricsAuthorizer(held, { allowedTtlMs: 1000, clock: clockReading(() => now) });
    assert.equal(await auth.authorize('Bearer prometheus', '10.0.0.1'), undefined);
    // Every unknown-token slot taken by made-up tokens from four sources, and more of them waiting their turn.
    const flood = Array.from({ length: 40 }, (_, i) => auth.authorize(`Bearer random-${i}`, `10.9.0.${i % 8}`));
    now += 1001;
    const before = calls.length;
    assert.equal(await auth.authorize('Bearer prometheus', '10.0.0.1'), undefined, 'its allow expired; asked again and allowed, through the flood');
    assert.equal(calls.length - before, 2, 'one TokenReview and one SubjectAccessReview');
    release();
    const answers = await Promise.all(flood);
    assert.equal(answers.filter((a) => a?.status === 401).length, 4, 'four made-up tokens reviewed (refused), one per slot');
    assert.ok(answers.every((a) => a?.status === 401 || a?.status === 503));
  });

  it('reviews of unknown tokens: one at a time per source, five in a burst then one a second', async () => {
    let now = 0;
    const { connection, calls } = apiServer();
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const auth = new MetricsAuthorizer({
      request: async <T>(method: string, path: string, request: { body?: unknown } = {}): Promise<T> => {
        if ((request.body as { spec: { token?: string } }).spec.token === 'made-up-0') await gate;
        return connection.request<T>(method, path, request);
      },
    }, { clock: clockReading(() => now) });
    const running = auth.authorize('Bearer made-up-0', '10.0.0.7');
    assert.equal((await auth.authorize('Bearer made-up-1', '10.0.0.7'))?.status, 503, 'one review at a time for a source');
    assert.equal((await auth.authorize('Bearer made-up-1', '10.0.0.8'))?.status, 401, 'another source is not held back');
    release();
    assert.equal((await running)?.status, 401);
    // 10.0.0.7 has spent 1 of 5: four more now, then one a second.
    const reviews = () => calls.filter((c) => c.includes('tokenreviews')).length;
    const start = reviews();
    const statuses: number[] = [];
    for (let i = 2; i < 12; i++) statuses.push((await auth.authorize(`Bearer made-up-${i}`, '10.0.0.7'))!.status);
    assert.deepEqual(statuses, [401, 401, 401, 401, 503, 503, 503, 503, 503, 503]);
    assert.equal(reviews() - start, 4, 'a 503 costs the API server nothing');
    now += 1000;
    assert.equal((await auth.authorize('Bearer made-up-20', '10.0.0.7'))?.status, 401, 'one more a second later');
    assert.equal((await auth.authorize('Bearer made-up-21', '10.0.0.7'))?.status, 503);
  });

  it('with an audience: the TokenReview asks for it, and a token the API server does not confirm for it is 401', async () => {
    const specs: Array<{ audiences?: string[] }> = [];
    const auth = new MetricsAuthorizer({
      request: async <T>(_method: string, path: string, request: { body?: unknown } = {}): Promise<T> => {
        const spec = (request.body as { spec: { token?: string; audiences?: string[] } }).spec;
        if (path.includes('subjectaccessreviews')) return { status: { allowed: true } } as T;
        specs.push(spec);
        const user = { username: 'oncall' };
        // for-relsync: minted for it; any-audience: an API server that says nothing of audiences (the token is its own).
        if (spec.token === 'for-relsync') return { status: { authenticated: true, audiences: ['relsync'], user } } as T;
        if (spec.token === 'any-audience') return { status: { authenticated: true, user } } as T;
        return { status: { authenticated: false } } as T;
      },
    }, { path: '/explain', audience: 'relsync' });
    assert.equal(await auth.authorize('Bearer for-relsync'), undefined);
    assert.deepEqual(specs[0]!.audiences, ['relsync']);
    assert.deepEqual(await auth.authorize('Bearer any-audience'), { status: 401, message: 'the token is not valid for the audience relsync' });
    assert.deepEqual(await auth.authorize('Bearer for-another'), { status: 401, message: 'the token is not valid for the audience relsync' });
  });
});
