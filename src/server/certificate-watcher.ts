/**
 * The certificate and key the HTTP port serves TLS with, read again when they change, as
 * controller-runtime's certwatcher does: the files are read every `intervalMs` (10 s), and a pair
 * that differs from the one served and makes a valid context (the key matches the certificate)
 * replaces it for new connections. A pair caught half-written (a new key beside the old
 * certificate) or unreadable is not taken: the one served stays, a warning names the file, and
 * the next read tries again. A Secret mounted as a volume (not with subPath) is updated in place
 * by the kubelet, so a renewed certificate (cert-manager) is served within the kubelet's sync
 * period plus `intervalMs`, without a restart.
 */
import { X509Certificate, createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createSecureContext } from 'node:tls';
import type { Logger } from 'pino';
import { every, systemClock, type Clock } from '../util/clock.js';
import { onAbort } from '../util/on-abort.js';

export interface CertificateFiles {
  readonly certFile: string;
  readonly keyFile: string;
  /** How often the files are read again; default 10 s. */
  readonly intervalMs?: number;
}

export interface CertificatePair {
  readonly cert: Buffer;
  readonly key: Buffer;
}

/** The pair in the files, checked: throws an error naming the file and what is wrong with it. */
export function readCertificatePair(files: CertificateFiles): CertificatePair & { readonly notAfter: string; readonly subject: string } {
  const read = (file: string, what: string) => {
    try {
      return readFileSync(file);
    } catch (err) {
      throw new Error(`${what} ${file}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`, { cause: err });
    }
  };
  const cert = read(files.certFile, '--tls-cert-file');
  const key = read(files.keyFile, '--tls-private-key-file');
  let x509: X509Certificate;
  try {
    x509 = new X509Certificate(cert);
  } catch (err) {
    throw new Error(`--tls-cert-file ${files.certFile}: not a PEM certificate (${(err as Error).message})`, { cause: err });
  }
  try {
    createSecureContext({ cert, key });
  } catch (err) {
    // Never the key's text: OpenSSL's reason only (e.g. "key values mismatch").
    throw new Error(`--tls-private-key-file ${files.keyFile}: not the key of ${files.certFile} or not a PEM key (${(err as Error).message})`, { cause: err });
  }
  return { cert, key, notAfter: x509.validTo, subject: x509.subject.replace(/\n/g, ', ') };
}

export class CertificateWatcher {
  private served: string;

  /** `initial`: the pair served from the start (readCertificatePair's). */
  constructor(
    private readonly files: CertificateFiles,
    initial: CertificatePair,
    private readonly logger: Logger,
    private readonly onChange: (pair: CertificatePair) => void,
    /** What the reads are spaced on; default systemClock. */
    private readonly clock: Clock = systemClock,
  ) {
    this.served = fingerprint(initial);
  }

  /** Reads the files again every interval until `signal` aborts. */
  start(signal: AbortSignal): void {
    const timer = every(this.clock, this.files.intervalMs ?? 10_000, () => this.check());
    onAbort(signal, () => timer.cancel());
  }

  /** One look at the files: serves them when they changed and make a valid pair. */
  check(): void {
    let pair: ReturnType<typeof readCertificatePair>;
    try {
      pair = readCertificatePair(this.files);
    } catch (err) {
      this.logger.warn({ err: (err as Error).message }, 'TLS certificate not reloaded: the one served stays; trying again');
      return;
    }
    const now = fingerprint(pair);
    if (now === this.served) return;
    this.onChange(pair);
    this.served = now;
    this.logger.info({ subject: pair.subject, notAfter: pair.notAfter }, 'TLS certificate reloaded');
  }
}

function fingerprint(pair: CertificatePair): string {
  return createHash('sha256').update(pair.cert).update('\0').update(pair.key).digest('hex');
}
