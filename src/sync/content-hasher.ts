/**
 * Content hashes of related copies, keyed. The hash is on every related copy
 * (`relsync.dev/content-hash`, to tell relsync's own writes from drift) and in
 * the store; a plain sha256 of a Secret's content would let anyone who can
 * read a copy's annotations or the store file guess weak values offline. So
 * it is an HMAC-SHA256 whose key only relsync reads: a Secret in the
 * service cluster, in the namespace of relsync's Lease, made by the first
 * replica that needs it (32 random bytes; of two racing creates one wins and
 * both read the winner's). A lost key is made again: each related copy is then
 * written once more, with a hash under the new key.
 */
import { createHmac, randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import { isAlreadyExists, isNotFound } from '../kube/api-error.js';
import type { ResourceClient } from '../kube/resource-client.js';
import { stableJson, type CopyContent } from './content.js';

export const secretType = { group: '', version: 'v1', resource: 'secrets', kind: 'Secret', namespaced: true } as const;

export class ContentHasher {
  constructor(private readonly key: Buffer) {}

  /** HMAC-SHA256 of the content, stable under key order. */
  hash(content: CopyContent): string {
    return createHmac('sha256', this.key).update(stableJson(content)).digest('hex');
  }
}

/** The name of the key's Secret for an agent. */
export function hashKeySecretName(agentName: string): string {
  return `relsync-${agentName.toLowerCase().replace(/[^a-z0-9.-]/g, '-')}-content-key`.slice(0, 253);
}

/** Reads the key from its Secret, making it first if there is none. */
export async function loadContentHasher(secrets: ResourceClient, namespace: string, agentName: string, logger: Logger): Promise<ContentHasher> {
  const name = hashKeySecretName(agentName);
  const existing = await secrets.get(namespace, name);
  const read = (secret: { data?: unknown } | undefined): Buffer | undefined => {
    const value = (secret?.data as Record<string, string> | undefined)?.key;
    const key = value === undefined ? undefined : Buffer.from(value, 'base64');
    return key && key.length >= 32 ? key : undefined;
  };
  const found = read(existing as { data?: unknown } | undefined);
  if (found) return new ContentHasher(found);
  if (existing) throw new Error(`the Secret ${namespace}/${name} holds no key of 32 bytes or more in data.key; delete it and relsync makes a new one`);
  try {
    await secrets.create(namespace, {
      apiVersion: 'v1',
      kind: 'Secret',
      // Not relsync's agent label: that is what marks copies.
      metadata: { name, namespace, labels: { 'relsync.dev/content-key-for': agentName } },
      type: 'Opaque',
      data: { key: randomBytes(32).toString('base64') },
    });
    logger.info({ secret: `${namespace}/${name}` }, 'made the key of related copies\' content hashes');
  } catch (err) {
    if (isNotFound(err)) throw new Error(`the namespace ${namespace} does not exist in the service cluster: relsync keeps the key of its content hashes there (the namespace of its Lease: POD_NAMESPACE or leaderElection.namespace)`, { cause: err });
    if (!isAlreadyExists(err)) throw err;
  }
  const made = read((await secrets.get(namespace, name)) as { data?: unknown } | undefined);
  if (!made) throw new Error(`the Secret ${namespace}/${name} holds no usable key`);
  return new ContentHasher(made);
}
