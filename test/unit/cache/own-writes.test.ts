// Own writes: the watch event of relsync's own write is not routed back, also
// when it arrives before the write's answer (the race that, at the initial sync
// of 10,000 primaries, cost a whole reconcile more for half of them).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { ObjectIdentity } from '../../../src/core/identity.js';
import { OwnWrites } from '../../../src/cache/own-writes.js';
import { FakeClock } from '../../harness/fake-clock.js';

const id: ObjectIdentity = { cluster: 'service', group: '', resource: 'configmaps', namespace: 'ns', name: 'copy' };

function answerLater(): { answer: (rv: string) => void; fail: (err: Error) => void; write: () => Promise<string> } {
  let answer!: (rv: string) => void;
  let fail!: (err: Error) => void;
  const answered = new Promise<string>((resolve, reject) => ((answer = resolve), (fail = reject)));
  return { answer, fail, write: () => answered };
}

describe('own writes', () => {
  it('knows its own version once, and nothing else', async () => {
    const own = new OwnWrites();
    own.record(id, '5');
    assert.equal(await own.consume(id, '4'), false, 'an older version is a change');
    assert.equal(await own.consume(id, '5'), true);
    assert.equal(await own.consume(id, '5'), false, 'once');
  });

  it('an event that comes before the write\'s answer waits for it, then is known as the write\'s', async () => {
    const own = new OwnWrites();
    const later = answerLater();
    const writing = own.during(id, async () => {
      const rv = await later.write();
      own.record(id, rv);
      return rv;
    });
    let judged: boolean | undefined;
    const event = own.consume(id, '7').then((v) => (judged = v));
    await new Promise((r) => setImmediate(r));
    assert.equal(judged, undefined, 'not judged while the write is on its way');
    later.answer('7');
    await writing;
    await event;
    assert.equal(judged, true);
  });

  it('an event of another version during a write, or of a write that failed, is a change', async () => {
    const own = new OwnWrites();
    const ok = answerLater();
    const writing = own.during(id, async () => own.record(id, await ok.write()));
    const other = own.consume(id, '6');
    ok.answer('7');
    await writing;
    assert.equal(await other, false, 'someone else\'s version');
    const failing = answerLater();
    const failed = own.during(id, () => failing.write()).catch(() => 'failed');
    const event = own.consume(id, '8');
    failing.fail(new Error('500'));
    assert.equal(await failed, 'failed');
    assert.equal(await event, false);
  });

  it('waits a moment at most: a write that hangs does not hold the watch', async () => {
    const clock = new FakeClock();
    const own = new OwnWrites({ waitMs: 250, clock });
    const hanging = answerLater();
    void own.during(id, () => hanging.write());
    let judged: boolean | undefined;
    void own.consume(id, '9').then((mine) => (judged = mine));
    await clock.advance(249);
    assert.equal(judged, undefined, 'still waiting for the answer at 249 ms');
    await clock.advance(1);
    assert.equal(judged, false, 'judged at 250 ms without the answer');
    hanging.answer('9');
  });

  it('a write of two requests (a POST, then a patch) makes two versions of its own', async () => {
    const own = new OwnWrites();
    own.record(id, '10');
    own.record(id, '11');
    assert.equal(await own.consume(id, '10'), true);
    assert.equal(await own.consume(id, '11'), true);
  });

  it('a write that changed nothing answers with the version it was sent against: that version is not its own', async () => {
    const own = new OwnWrites();
    own.record(id, '12', '12');
    assert.equal(await own.consume(id, '12'), false, "the tenant's version reaches every primary it concerns");
  });
});
