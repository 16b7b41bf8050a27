import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { pino } from 'pino';
import { asReconcile, logContext } from '../../../src/util/log-context.js';
import { textLine, textLines } from '../../../src/util/logger.js';

/** A logger like createLogger's (levels as names, the reconcile's id mixed in), writing into `lines`. */
function captured(lines: string[], text = false) {
  const sink = { write: (s: string) => void lines.push(...s.split('\n').filter(Boolean)) };
  return pino({ level: 'debug', base: { component: 'relsync' }, timestamp: pino.stdTimeFunctions.isoTime, formatters: { level: (label: string) => ({ level: label }) }, mixin: logContext }, text ? textLines(sink) : sink);
}

describe('logs', () => {
  it('write levels as names, and each line of a reconcile carries its id, another reconcile\'s another', async () => {
    const lines: string[] = [];
    const logger = captured(lines);
    logger.info('outside');
    await asReconcile(async () => {
      logger.debug('first');
      await new Promise((r) => setTimeout(r, 1));
      logger.warn('after an await');
    });
    await asReconcile(async () => logger.info('other'));
    const parsed = lines.map((l) => JSON.parse(l) as { level: string; msg: string; reconcile?: string });
    assert.deepEqual(parsed.map((p) => p.level), ['info', 'debug', 'warn', 'info']);
    assert.equal(parsed[0]!.reconcile, undefined);
    assert.match(parsed[1]!.reconcile ?? '', /^[0-9a-f]{16}$/);
    assert.equal(parsed[2]!.reconcile, parsed[1]!.reconcile, 'the same id across an await');
    assert.notEqual(parsed[3]!.reconcile, parsed[1]!.reconcile);
  });

  it('as text: time, level, message, then the fields, quoted where they are not plain words', () => {
    const line = textLine(JSON.stringify({ level: 'warn', time: '2026-12-05T07:00:00.000Z', component: 'relsync', msg: 'reconcile failed; will retry', primary: 'tenant-a:databases.demo.relsync.dev:default/orders', err: 'PATCH /x: 409 Conflict', retryInMs: 500 }));
    assert.equal(line, '2026-12-05T07:00:00.000Z WARN  reconcile failed; will retry primary=tenant-a:databases.demo.relsync.dev:default/orders err="PATCH /x: 409 Conflict" retryInMs=500');
    const lines: string[] = [];
    captured(lines, true).info({ cluster: 'tenant-a' }, 'watch started');
    assert.match(lines[0]!, /^\d{4}-\d\d-\d\dT[\d:.]+Z INFO {2}watch started cluster=tenant-a$/);
    assert.equal(textLine('not json'), 'not json', 'a line that is not JSON passes as it is');
    // A message or a value with a line break stays on its line (no forged log lines).
    const forged = textLine(JSON.stringify({ level: 'info', time: 't', msg: 'denied: x\n2026-12-05T07:00:00.000Z INFO  all fine', err: 'a\nb' }));
    assert.equal(forged.split('\n').length, 1, forged);
    assert.ok(forged.includes('msg="denied: x\\n2026') && forged.includes('err="a\\nb"'), forged);
    // Nor fields of its own: a message that could pass for fields is quoted whole.
    assert.match(textLine(JSON.stringify({ level: 'warn', time: 't', msg: 'denied reconcile=deadbeef primary=other/x' })), /^t WARN {2}msg="denied reconcile=deadbeef primary=other\/x"$/);
    assert.ok(!/[\u2028\u202e]/.test(textLine(JSON.stringify({ level: 'info', time: 't', msg: 'a\u202eb', v: 'c\u2028d' }))), 'no line separators or bidi controls pass');
  });
});
