// The TLS pair relsync is given: a bad one is refused with the file named (and never its key's
// text), and a watcher serves a new pair only once both files make one.
import assert from 'node:assert/strict';
import { copyFileSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import pino from 'pino';
import { CertificateWatcher, readCertificatePair } from '../../../src/server/certificate-watcher.js';
import { selfSignedCertificate } from '../../harness/certificates.js';
import { FakeClock } from '../../harness/fake-clock.js';

describe('TLS certificate files', () => {
  const dir = mkdtempSync(join(tmpdir(), 'relsync-cert-'));
  const first = selfSignedCertificate(dir, 'first');
  const second = selfSignedCertificate(dir, 'second');

  it('reads a valid pair, and names the file at fault in a bad one without quoting the key', () => {
    const pair = readCertificatePair({ certFile: first.certFile, keyFile: first.keyFile });
    assert.match(pair.subject, /CN=first/);
    const key = readFileSync(second.keyFile, 'utf8');
    const refused = (certFile: string, keyFile: string) => {
      try {
        readCertificatePair({ certFile, keyFile });
      } catch (err) {
        return (err as Error).message;
      }
      assert.fail('accepted');
    };
    const mismatch = refused(first.certFile, second.keyFile);
    assert.match(mismatch, new RegExp(`^--tls-private-key-file ${second.keyFile}: not the key of ${first.certFile}`));
    assert.ok(!mismatch.includes(key.split('\n')[1]!), 'no key text');
    assert.match(refused(join(dir, 'missing.crt'), first.keyFile), /^--tls-cert-file .*missing\.crt: ENOENT$/);
    const garbage = join(dir, 'garbage.crt');
    writeFileSync(garbage, 'not a certificate');
    assert.match(refused(garbage, first.keyFile), /^--tls-cert-file .*garbage\.crt: not a PEM certificate/);
  });

  it('serves a changed pair once both files make one; a half-written pair leaves the old one served', () => {
    const certFile = join(dir, 'tls.crt');
    const keyFile = join(dir, 'tls.key');
    copyFileSync(first.certFile, certFile);
    copyFileSync(first.keyFile, keyFile);
    const served: string[] = [];
    const lines: string[] = [];
    const watcher = new CertificateWatcher({ certFile, keyFile }, readCertificatePair({ certFile, keyFile }), pino({ level: 'info' }, { write: (l: string) => void lines.push(l) }), (pair) => served.push(pair.cert.toString()));
    watcher.check();
    assert.deepEqual(served, [], 'unchanged: nothing to do');
    copyFileSync(second.certFile, certFile);
    watcher.check();
    assert.deepEqual(served, [], 'the new certificate beside the old key is not taken');
    assert.equal(lines.filter((l) => l.includes('not reloaded')).length, 1);
    copyFileSync(second.keyFile, keyFile);
    watcher.check();
    assert.deepEqual(served, [readFileSync(second.certFile, 'utf8')]);
    watcher.check();
    assert.equal(served.length, 1, 'served once');
  });

  it('started with a signal that aborted already (a shutdown during startup): no timer is left behind', () => {
    const clock = new FakeClock();
    const pair = readCertificatePair({ certFile: first.certFile, keyFile: first.keyFile });
    const watcher = new CertificateWatcher({ certFile: first.certFile, keyFile: first.keyFile, intervalMs: 1000 }, pair, pino({ level: 'silent' }), () => undefined, clock);
    const live = new AbortController();
    watcher.start(live.signal);
    assert.equal(clock.pending, 1, 'a running watcher has its timer');
    live.abort();
    assert.equal(clock.pending, 0, 'cancelled at the abort');
    watcher.start(AbortSignal.abort());
    assert.equal(clock.pending, 0, 'none at all when the signal had aborted');
  });
});
