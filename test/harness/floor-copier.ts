// The floor client of a latency measurement, as a process of its own (so the test process's load
// is not its own): the smallest program that watches one ConfigMap on a platform and writes each
// change straight into the service cluster — no queue, no store, no rules. What the machine and
// the API servers allow; relsync's latency is compared with it (arrival-sampler.ts).
//
// node floor-copier.js <platform kubeconfig> <service kubeconfig> <namespace> <name> <destination namespace>
import { CoreV1Api, KubeConfig, type V1ConfigMap } from '@kubernetes/client-node';
import { lastingWatch } from './lasting-watch.js';

const args = process.argv.slice(2);
if (args.length !== 5 || args.some((a) => !a)) throw new Error('usage: floor-copier <platform kubeconfig> <service kubeconfig> <namespace> <name> <destination namespace>');
const [platformConfig, serviceConfig, namespace, name, destination] = args as [string, string, string, string, string];
const platform = new KubeConfig();
platform.loadFromFile(platformConfig);
const service = new KubeConfig();
service.loadFromFile(serviceConfig);
const core = service.makeApiClient(CoreV1Api);

// Level-based, as relsync is: while a write is on its way, only the latest data waits.
let writing = false;
let next: Record<string, string> | undefined;
async function write(): Promise<void> {
  if (writing) return;
  writing = true;
  try {
    while (next) {
      const data = next;
      next = undefined;
      const body = { metadata: { name, namespace: destination }, data };
      try {
        await core.replaceNamespacedConfigMap({ namespace: destination, name, body });
      } catch (err) {
        if ((err as { code?: number }).code !== 404) throw err;
        await core.createNamespacedConfigMap({ namespace: destination, body });
      }
    }
  } finally {
    writing = false;
  }
}

await lastingWatch(platform, `/api/v1/namespaces/${namespace}/configmaps`, { fieldSelector: `metadata.name=${name}` }, (type, object: V1ConfigMap) => {
  if (type !== 'ADDED' && type !== 'MODIFIED') return;
  next = object.data ?? {};
  void write().catch((err: Error) => process.stderr.write(`floor-copier: ${err.message}\n`));
}, (err) => process.stderr.write(`floor-copier: the watch ended (${(err as Error | undefined)?.message ?? 'closed'}); watching again\n`));
process.stdout.write('watching\n');
