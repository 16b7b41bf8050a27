// Lint runs beside the type check (`tsc` in `npm run build`); both are part of `npm test`.
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

/** How src/ may not read time or set timers: through a Clock (src/util/clock.ts) only. */
const THROUGH_A_CLOCK = 'time is read through a Clock (src/util/clock.ts); where it cannot be, say why: `eslint-disable-next-line <rule> -- why`';
const TIME_RULES = ['no-restricted-globals', 'no-restricted-properties', 'no-restricted-syntax', 'no-restricted-imports'];

/** client-node's index and KubeConfig load its generated API clients: 27 MB of heap relsync never uses (src/kube/kubeconfig.ts). */
const WITHOUT_API_CLIENTS = "client-node's index, dist/config.js and most of its modules load its generated API clients (27 MB of heap): src/ imports only the kubeconfig parsers and authenticators src/kube/kubeconfig.ts uses";

/** An exemption from the time rules must say why (`eslint-disable-next-line no-restricted-globals -- why`). */
const exemptionSaysWhy = {
  meta: { type: 'problem', schema: [], messages: { why: 'an exemption from reading time through a Clock says why after "--"' } },
  create(context) {
    return {
      Program() {
        for (const comment of context.sourceCode.getAllComments()) {
          const directive = /^\s*eslint-disable(?:-next-line|-line)?\s+([^]*)$/.exec(comment.value);
          if (!directive) continue;
          const [rules, why] = directive[1].split(/\s--\s/);
          if (TIME_RULES.some((r) => rules.includes(r)) && !why?.trim()) context.report({ loc: comment.loc, messageId: 'why' });
        }
      },
    };
  },
};

/** Every `relsync.dev/` key relsync writes is named in src/core/relsync-keys.ts, and only there. */
const keysInOneModule = {
  meta: { type: 'problem', schema: [], messages: { key: 'a relsync.dev/ key is named in src/core/relsync-keys.ts only: import it from there' } },
  create(context) {
    if (context.filename.endsWith('src/core/relsync-keys.ts')) return {};
    const check = (node, text) => {
      if (typeof text === 'string' && text.startsWith('relsync.dev/')) context.report({ node, messageId: 'key' });
    };
    return { Literal: (node) => check(node, node.value), TemplateElement: (node) => check(node, node.value.cooked) };
  },
};

export default tseslint.config(
  { ignores: ['dist/**', '.dist-snap/**', 'node_modules/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      '@typescript-eslint/consistent-type-imports': 'error',
      'no-constant-condition': ['error', { checkLoops: false }],
    },
  },
  {
    // Time is injected (a Clock), so that tests never wait for it: no direct time read in src/.
    files: ['src/**/*.ts'],
    ignores: ['src/util/clock.ts'],
    linterOptions: { reportUnusedDisableDirectives: 'error' },
    plugins: { local: { rules: { 'exemption-says-why': exemptionSaysWhy, 'keys-in-one-module': keysInOneModule } } },
    rules: {
      'local/exemption-says-why': 'error',
      'local/keys-in-one-module': 'error',
      'no-restricted-globals': ['error', ...['setTimeout', 'setInterval', 'clearTimeout', 'clearInterval'].map((name) => ({ name, message: THROUGH_A_CLOCK }))],
      'no-restricted-properties': [
        'error',
        { object: 'Date', property: 'now', message: THROUGH_A_CLOCK },
        { object: 'performance', property: 'now', message: THROUGH_A_CLOCK },
        { object: 'process', property: 'hrtime', message: THROUGH_A_CLOCK },
        { object: 'AbortSignal', property: 'timeout', message: THROUGH_A_CLOCK },
      ],
      'no-restricted-syntax': [
        'error',
        { selector: "NewExpression[callee.name='Date'][arguments.length=0]", message: THROUGH_A_CLOCK },
        { selector: "CallExpression[callee.name='Date']", message: THROUGH_A_CLOCK },
        // A request's or socket's own timer (req.setTimeout), a global one reached through an object.
        { selector: "CallExpression[callee.property.name=/^set(Timeout|Interval)$/]", message: THROUGH_A_CLOCK },
      ],
      'no-restricted-imports': ['error', {
        paths: [
          ...['timers', 'node:timers', 'timers/promises', 'node:timers/promises', 'perf_hooks', 'node:perf_hooks'].map((name) => ({ name, message: THROUGH_A_CLOCK })),
          { name: '@kubernetes/client-node', message: WITHOUT_API_CLIENTS },
        ],
        // Only the modules kubeconfig.ts uses: most others (api.js, object.js, informer.js, …) load the clients too.
        patterns: [{
          group: ['@kubernetes/client-node/dist/*', ...['config_types', 'auth', 'exec_auth', 'file_auth', 'oidc_auth', 'azure_auth', 'gcp_auth'].map((m) => `!@kubernetes/client-node/dist/${m}.js`)],
          message: WITHOUT_API_CLIENTS,
        }],
      }],
    },
  },
  {
    // Steps a reader can hold in mind (issue #37): no function in src over 60 lines.
    files: ['src/**/*.ts'],
    rules: { 'max-lines-per-function': ['error', { max: 60, skipBlankLines: true, skipComments: true }] },
  },
  {
    // The reconcile and sweep paths, from a watch line to the store, and the term's wiring: values
    // instead of positional lists.
    files: [
      'src/sync/**/*.ts',
      'src/cache/**/*.ts',
      'src/store/**/*.ts',
      'src/controller/event-router.ts',
      'src/controller/watches.ts',
      'src/controller/work-queue.ts',
      'src/controller/sweep*.ts',
      'src/controller/follow-up-sweeps.ts',
      'src/controller/wiring.ts',
      'src/controller/term-queue.ts',
      'src/config/**/*.ts',
      'src/kube/list-watch.ts',
    ],
    rules: { 'max-params': ['error', 4] },
  },
  {
    files: ['scripts/**/*.mjs'],
    languageOptions: { globals: { process: 'readonly', console: 'readonly' } },
  },
);
