/**
 * One GET over http or https, for `relsync explain --server`: fetch cannot be told which
 * certificate authority to trust, and relsync's own certificate is often a private one's
 * (cert-manager). No redirect is followed (the token goes to this address only); the body is
 * read up to `maxBytes`.
 */
import http from 'node:http';
import https from 'node:https';

export interface GetOptions {
  readonly headers: Readonly<Record<string, string>>;
  /** PEM certificate(s) to trust for https; default: Node's (the system's) authorities. */
  readonly ca?: Buffer;
  readonly timeoutMs: number;
  readonly maxBytes: number;
}

export function httpGet(url: URL, options: GetOptions): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const secure = url.protocol === 'https:';
    if (!secure && url.protocol !== 'http:') return reject(new Error(`${url.protocol} is not http: or https:`));
    const request = (secure ? https : http).get(url, { headers: { ...options.headers, connection: 'close' }, ...(secure && options.ca ? { ca: options.ca } : {}) }, (res) => {
      const chunks: Buffer[] = [];
      let size = 0;
      res.on('data', (chunk: Buffer) => {
        size += chunk.length;
        if (size > options.maxBytes) return res.destroy(new Error(`the answer is larger than ${options.maxBytes} bytes`));
        chunks.push(chunk);
      });
      res.on('error', reject);
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') }));
    });
    // eslint-disable-next-line no-restricted-syntax -- the socket's idle timeout: Node times the socket's silence, which no Clock sees
    request.setTimeout(options.timeoutMs, () => request.destroy(new Error(`no answer within ${options.timeoutMs / 1000} s`)));
    request.on('error', reject);
  });
}
