// A watch that is started again when it ends: kube-apiserver closes every watch after its
// request timeout (30–60 min by default), and a latency measurement must not quietly stop
// seeing arrivals when that happens. Each new watch lists first (no resourceVersion), so what
// changed while none was open arrives then, late rather than never.
import { Watch, type KubeConfig } from '@kubernetes/client-node';

export interface LastingWatch {
  abort(): void;
}

export async function lastingWatch<T>(kubeConfig: KubeConfig, path: string, query: Record<string, string>, onEvent: (type: string, object: T) => void, onRestart?: (err: unknown) => void): Promise<LastingWatch> {
  let aborted = false;
  let current: { abort(): void } | undefined;
  const start = async (): Promise<void> => {
    current = await new Watch(kubeConfig).watch(path, query, onEvent, (err) => {
      if (aborted) return;
      onRestart?.(err);
      setTimeout(() => void start().catch(onRestart ?? (() => undefined)), 200);
    });
    if (aborted) current.abort();
  };
  await start();
  return {
    abort() {
      aborted = true;
      current?.abort();
    },
  };
}
