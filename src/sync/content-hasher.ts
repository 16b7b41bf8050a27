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
import type { KubeObject } from '../core/object.js';
import { stableJson, type CopyContent } from './content.js';
import { AGENT_LABEL, KEY_LABEL } from '../core/relsync-keys.js';

export const secretType = { group: '', version: 'v1', resource: 'secrets', kind: 'Secret', namespaced: true } as const;

export class ContentHasher {
  private key: Buffer | undefined;

  /** `key`: given (tests); otherwise `load` reads it at the start of each term, after the checks that may refuse to run. */
  constructor(key?: Buffer) {
    this.key = key;
  }

  /** HMAC-SHA256 of the content, stable under key order. */
  hash(content: CopyContent): string {
    return this.hashSerialized(stableJson(content));
  }

  /** A status relsync copies (a related rule's syncStatus): apart from content hashes, so that neither can stand for the other. */
  hashStatus(status: unknown): string {
    return this.hashSerialized(`status\u0000${stableJson(status ?? {})}`);
  }

  /** The same, of content the caller already serialized with stableJson (to weigh it, too). */
  hashSerialized(serialized: string): string {
    if (!this.key) throw new Error('the content-hash key is not loaded yet');
    return createHmac('sha256', this.key).update(serialized).digest('hex');
  }

  /**
   * Reads the key from its Secret (made first where there is none and `mayCreate`: a one-shot
   * sweep that does not know its Lease's namespace never makes one, since it would hash under a
   * key the installation's leader does not have). Read again each term, so a replica that leads after
   * another uses the key that is there now.
   */
  async load(secrets: ResourceClient, place: KeyPlace, logger: Logger): Promise<void> {
    this.key = await loadKey(secrets, place, logger);
  }
}

/** The name of the key's Secret for an agent. */
export function hashKeySecretName(agentName: string): string {
  return `relsync-${agentName.toLowerCase().replace(/[^a-z0-9.-]/g, '-')}-content-key`.slice(0, 253);
}

/** Where an agent's key Secret is, and whether this process may make it. */
export interface KeyPlace {
  readonly namespace: string;
  readonly agentName: string;
  readonly mayCreate: boolean;
}

async function loadKey(secrets: ResourceClient, { namespace, agentName, mayCreate }: KeyPlace, logger: Logger): Promise<Buffer> {
  const name = hashKeySecretName(agentName);
  const where = `${namespace}/${name}`;
  const read = (secret: KubeObject | undefined): Buffer | undefined => {
    if (!secret) return undefined;
    // Only relsync's own key Secret: one someone else put there (a key they know) is refused.
    if (secret.metadata.labels?.[KEY_LABEL] !== agentName || secret.metadata.labels?.[AGENT_LABEL] !== undefined) {
      throw new Error(`the Secret ${where} was not made by relsync (it lacks the label ${KEY_LABEL}=${agentName}); relsync does not hash with a key it did not make: delete it`);
    }
    const value = (secret.data as Record<string, string> | undefined)?.key;
    const key = value === undefined ? undefined : Buffer.from(value, 'base64');
    if (!key || key.length < 32) throw new Error(`the Secret ${where} holds no key of 32 bytes or more in data.key; delete it and relsync makes a new one`);
    return key;
  };
  const found = read(await secrets.get(namespace, name));
  if (found) return found;
  if (!mayCreate) throw new Error(`there is no content-hash key (${where}) yet, and this process does not know its Lease's namespace (no POD_NAMESPACE, no leaderElection.namespace) to make one where its installation's leader finds it`);
  try {
    await secrets.create(namespace, {
      apiVersion: 'v1',
      kind: 'Secret',
      // Not relsync's agent label: that is what marks copies.
      metadata: { name, namespace, labels: { [KEY_LABEL]: agentName } },
      type: 'Opaque',
      immutable: true,
      data: { key: randomBytes(32).toString('base64') },
    });
    logger.info({ secret: where }, 'made the key of related copies\' content hashes');
  } catch (err) {
    if (isNotFound(err)) throw new Error(`the namespace ${namespace} does not exist in the service cluster: relsync keeps the key of its content hashes there (the namespace of its Lease: POD_NAMESPACE or leaderElection.namespace)`, { cause: err });
    if (!isAlreadyExists(err)) throw err;
  }
  const made = read(await secrets.get(namespace, name));
  if (!made) throw new Error(`the Secret ${where} holds no usable key`);
  return made;
}
