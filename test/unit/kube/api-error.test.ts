// What an API error may say: a Status's message, or one short plain line; an
// answer that looks like data (an object echoed back, a Secret among it) is
// reported by its size only, so it never reaches logs, Events or the store.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ApiError, isLastingRefusal, isObjectNotFound } from '../../../src/kube/api-error.js';

describe('API errors', () => {
  it('says what a Status says, and which object it is about', () => {
    const err = new ApiError('GET', '/api/v1/namespaces/a/secrets/s', 404, JSON.stringify({ kind: 'Status', reason: 'NotFound', message: 'secrets "s" not found', details: { name: 's', kind: 'secrets' } }));
    assert.match(err.message, /404 NotFound: secrets "s" not found/);
    assert.equal(isObjectNotFound(err, 's'), true);
    assert.equal(isObjectNotFound(err, 'other'), false, 'a NotFound about another object is no proof');
  });

  it('keeps a plain line such as "404 page not found", which is no proof that an object is gone', () => {
    const err = new ApiError('GET', '/apis/x/v1/namespaces/a/things/t', 404, '404 page not found\n');
    assert.match(err.message, /404: 404 page not found$/);
    assert.equal(isObjectNotFound(err, 't'), false);
  });

  it('takes a NotFound Status that names no object for what it is: the path is not served, which is no proof either', () => {
    // What kube-apiserver answers for a type it does not serve (a CRD removed for a moment, a kcp binding not ready).
    const body = JSON.stringify({ kind: 'Status', status: 'Failure', message: 'the server could not find the requested resource', reason: 'NotFound', details: {}, code: 404 });
    assert.equal(isObjectNotFound(new ApiError('GET', '/apis/x/v1/namespaces/a/things/t', 404, body), 't'), false);
  });

  it('leaves out the values a validation message quotes', () => {
    const body = JSON.stringify({ kind: 'Status', reason: 'Invalid', message: 'Thing.example.com "t" is invalid: spec.password: Invalid value: "hunter2": must be short, spec.n: Invalid value: 12345: too big' });
    const err = new ApiError('PUT', '/apis/example.com/v1/namespaces/a/things/t', 422, body);
    assert.doesNotMatch(err.message, /hunter2|12345/);
    assert.match(err.message, /spec\.password: Invalid value: "…": must be short, spec\.n: Invalid value: …: too big/);
    assert.match(err.message, /Thing\.example\.com "t" is invalid/, 'the object\'s name, which the path says, stays');
  });

  it('never repeats an answer that looks like data', () => {
    const secret = JSON.stringify({ kind: 'Secret', metadata: { name: 's' }, data: { password: 'aHVudGVyMg==' }, stringData: { token: 'hunter2' } });
    for (const body of [secret, `<html>${secret}</html>`, `error: ${secret}`]) {
      const err = new ApiError('PUT', '/api/v1/namespaces/a/secrets/s', 500, body);
      assert.doesNotMatch(err.message, /hunter2|aHVudGVyMg|password/, body);
      assert.match(err.message, /an answer of \d+ bytes that is not a Kubernetes Status/);
    }
  });

  it('tells a lasting refusal (backed off to 1,000 s) from what passes by itself', () => {
    const status = (code: number, reason: string, message: string) => new ApiError('PATCH', '/x', code, JSON.stringify({ kind: 'Status', code, reason, message }));
    for (const [code, reason] of [[400, 'BadRequest'], [403, 'Forbidden'], [405, 'MethodNotAllowed'], [413, 'RequestEntityTooLarge'], [415, 'UnsupportedMediaType'], [422, 'Invalid']] as const) {
      assert.equal(isLastingRefusal(status(code, reason, 'no')), true, `${code}`);
    }
    for (const err of [
      status(403, 'Forbidden', 'unable to create new content in namespace x because it is being terminated'),
      status(403, 'Forbidden', 'exceeded quota: compute, requested: pods=1'),
      status(404, 'NotFound', 'the server could not find the requested resource'),
      status(409, 'Conflict', 'the object has been modified'),
      status(429, 'TooManyRequests', 'slow down'),
      status(401, 'Unauthorized', 'token expired'),
      status(500, 'InternalError', 'etcd'),
      new ApiError('PATCH', '/x', 403, 'Forbidden (a proxy)'),
      new Error('socket hang up'),
    ]) {
      assert.equal(isLastingRefusal(err), false, String(err));
    }
  });
});
