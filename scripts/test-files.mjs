// Runs the test files given, in the order given, `RELSYNC_TEST_CONCURRENCY`
// at a time (default 2), with the spec reporter; exits 1 if any test failed.
// `node --test` would sort the files by name; run-tests.mjs orders them so
// that the longest start first. Called by scripts/run-tests.mjs.
import { run } from 'node:test';
import { spec } from 'node:test/reporters';

const concurrency = Number(process.env.RELSYNC_TEST_CONCURRENCY ?? 2) || 1;
const stream = run({ files: process.argv.slice(2), concurrency });
stream.on('test:fail', () => {
  process.exitCode = 1;
});
stream.compose(spec).pipe(process.stdout);
