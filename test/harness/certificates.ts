/**
 * A self-signed certificate for a test's TLS server, made by the machine's
 * openssl (nothing downloaded): valid for 127.0.0.1 and localhost, its own
 * certificate authority, so a client trusts it by passing it as `ca`.
 */
import { spawnSync } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

export interface TestCertificate {
  readonly certFile: string;
  readonly keyFile: string;
  /** The certificate's PEM, to trust it. */
  readonly pem: Buffer;
  /** SHA-256 fingerprint as Node prints it (AB:CD:…), to tell two certificates apart. */
  readonly fingerprint256: string;
}

/** Writes `<name>.crt` and `<name>.key` into `dir`. */
export function selfSignedCertificate(dir: string, name: string, commonName = name): TestCertificate {
  const certFile = join(dir, `${name}.crt`);
  const keyFile = join(dir, `${name}.key`);
  const out = spawnSync('openssl', [
    'req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes',
    '-keyout', keyFile, '-out', certFile, '-days', '1', '-subj', `/CN=${commonName}`,
    '-addext', 'subjectAltName=IP:127.0.0.1,DNS:localhost',
  ], { encoding: 'utf8' });
  if (out.status !== 0) throw new Error(`openssl could not make a certificate: ${out.error?.message ?? out.stderr}`);
  const pem = readFileSync(certFile);
  return { certFile, keyFile, pem, fingerprint256: new X509Certificate(pem).fingerprint256 };
}
