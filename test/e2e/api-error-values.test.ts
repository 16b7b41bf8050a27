// What relsync repeats of a real API server's refusals: every value the
// request carried that the server quotes back (`Invalid value: "…"`,
// `Unsupported value`, `Duplicate value`, a CRD's type and format checks,
// CEL rules, a ValidatingAdmissionPolicy's own words, a Secret's or a label's
// keys) is left out of the ApiError's message, which goes to logs, Events and
// the store; what the provider needs to fix it stays (the field, the kind of
// error, the object's name). Each request is a server-side apply, as relsync
// writes copies; the answer's body is turned into an ApiError exactly as
// kube/connection.ts does. The raw messages are printed: the unit tests of
// kube/status-message.ts hold them as recorded here (kube-apiserver v1.36.3).
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import https from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { after, before, describe, it } from 'node:test';
import { ApiError } from '../../src/kube/api-error.js';
import { startControlPlane, type ControlPlane } from '../harness/control-plane.js';
import { eventually, installCrd } from '../harness/kube.js';

/** In every value sent: found in a message, it leaked. */
const SECRET = 'hunter2zq';
const NS = 'values';

const crd = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: { name: vaults.values.relsync.dev }
spec:
  group: values.relsync.dev
  scope: Namespaced
  names: { plural: vaults, singular: vault, kind: Vault }
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema:
          type: object
          properties:
            spec:
              type: object
              x-kubernetes-validations:
                - rule: "!has(self.token) || self.token.startsWith('ok')"
                  messageExpression: "'token \\"' + self.token + '\\" must start with ok'"
                - rule: "!has(self.phrase) || self.phrase.size() < 4"
                  message: "phrase is too long"
              properties:
                password: { type: string, maxLength: 5 }
                mode: { type: string, enum: [fast, safe] }
                email: { type: string, format: email }
                pin: { type: integer }
                code: { type: string, pattern: "^[0-9]+$" }
                token: { type: string }
                phrase: { type: string }
                tags: { type: array, items: { type: string }, x-kubernetes-list-type: set }
                needed: { type: string }
              required: [needed]
`;

const policy = {
  apiVersion: 'admissionregistration.k8s.io/v1',
  kind: 'ValidatingAdmissionPolicy',
  metadata: { name: 'no-hunters' },
  spec: {
    failurePolicy: 'Fail',
    matchConstraints: { resourceRules: [{ apiGroups: [''], apiVersions: ['v1'], operations: ['CREATE', 'UPDATE'], resources: ['configmaps'] }] },
    validations: [{ expression: "!has(object.data) || !has(object.data.owner) || object.data.owner == 'ops'", messageExpression: "'owner \"' + object.data.owner + '\" is not allowed'" }],
  },
};
const binding = {
  apiVersion: 'admissionregistration.k8s.io/v1',
  kind: 'ValidatingAdmissionPolicyBinding',
  metadata: { name: 'no-hunters' },
  spec: { policyName: 'no-hunters', validationActions: ['Deny'], matchResources: { namespaceSelector: { matchLabels: { 'values.relsync.dev/policy': 'on' } } } },
};

describe('values quoted in API server refusals', () => {
  let plane: ControlPlane;
  let ca: Buffer;

  /** A request with the admin token; the answer's status and body as they came. */
  const send = (method: string, path: string, body: unknown, contentType = 'application/json'): Promise<{ status: number; body: string }> =>
    new Promise((resolve, reject) => {
      const text = body === undefined ? undefined : JSON.stringify(body);
      const req = https.request(`${plane.url}${path}`, { method, ca, timeout: 10_000, headers: { Authorization: `Bearer ${plane.token}`, 'Content-Type': contentType, ...(text ? { 'Content-Length': Buffer.byteLength(text) } : {}) } }, (res) => {
        let answer = '';
        res.setEncoding('utf8');
        res.on('data', (d: string) => (answer += d));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: answer }));
      });
      req.on('error', reject);
      req.end(text);
    });

  /** relsync's write of a copy (server-side apply), refused: the raw Status message and the ApiError relsync makes of it. */
  const refused = async (path: string, object: Record<string, unknown>): Promise<{ raw: string; said: string }> => {
    const answer = await send('PATCH', `${path}?fieldManager=relsync-e2e&force=true`, object, 'application/apply-patch+yaml');
    assert.ok(answer.status >= 400, `${path} was not refused: ${answer.status}`);
    const raw = (JSON.parse(answer.body) as { message: string }).message;
    console.log(`recorded (${answer.status}): ${JSON.stringify(raw)}`);
    return { raw, said: new ApiError('PATCH', path, answer.status, answer.body).message };
  };

  const ensure = async (path: string, object: unknown) => {
    const answer = await send('POST', path, object);
    assert.ok(answer.status < 300 || answer.status === 409, `${path}: ${answer.status} ${answer.body}`);
  };

  before(async () => {
    plane = await startControlPlane('api-error-values');
    ca = readFileSync(join(plane.dir, 'certs', 'apiserver.crt'));
    const dir = mkdtempSync(join(tmpdir(), 'relsync-e2e-api-errors-'));
    writeFileSync(join(dir, 'crd.yaml'), crd);
    await installCrd(plane.kubeConfig, pathToFileURL(join(dir, 'crd.yaml')));
    await ensure('/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name: NS, labels: { 'values.relsync.dev/policy': 'on' } } });
    await ensure('/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies', policy);
    await ensure('/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings', binding);
  });
  after(async () => {
    await plane?.stop();
  });

  const vault = (name: string, spec: Record<string, unknown>) => refused(`/apis/values.relsync.dev/v1/namespaces/${NS}/vaults/${name}`, { apiVersion: 'values.relsync.dev/v1', kind: 'Vault', metadata: { name, namespace: NS }, spec: { needed: 'x', ...spec } });

  it('leaves out what a CRD\'s schema quotes: enum, format, pattern, set duplicates; keeps a length limit', async () => {
    const cases: Array<[string, Record<string, unknown>, RegExp]> = [
      ['enum', { mode: SECRET }, /spec\.mode: Unsupported value: "…"/],
      ['format', { email: SECRET }, /spec\.email: Invalid value: "…"/],
      ['pattern', { code: SECRET }, /spec\.code: Invalid value: "…"/],
      // Server-side apply finds a set's duplicates first (a 500 of its typed patch).
      ['duplicate', { tags: [SECRET, SECRET] }, /\.spec\.tags: duplicate entries for key \[="…"\]/],
    ];
    for (const [name, spec, kept] of cases) {
      const { raw, said } = await vault(`v-${name}`, spec);
      assert.ok(raw.includes(SECRET), `${name}: the server quoted the value (else this case proves nothing): ${raw}`);
      assert.ok(!said.includes(SECRET), `${name}: ${said}`);
      assert.match(said, kept, name);
      assert.ok(said.replace(/^PATCH \S+/, '').includes(`v-${name}`), `${name}: the object's name, which the path says, stays in the message: ${said}`);
    }
    // maxLength says the limit, not the value (v1.36): nothing to leave out, and the limit stays.
    assert.match((await vault('v-length', { password: `${SECRET}-long` })).said, /spec\.password: Too long: may not be more than 5 bytes/);
  });

  it('leaves out what a CEL rule\'s message quotes, and keeps a required field\'s path', async () => {
    const cel = await vault('v-cel', { token: SECRET });
    assert.ok(cel.raw.includes(SECRET), cel.raw);
    assert.ok(!cel.said.includes(SECRET), cel.said);
    assert.match(cel.said, /spec: Invalid value: token "…" must start with ok/);
    assert.match((await vault('v-phrase', { phrase: SECRET })).said, /spec: Invalid value: phrase is too long/, 'a rule\'s own words stay');
    const missing = await refused(`/apis/values.relsync.dev/v1/namespaces/${NS}/vaults/v-required`, { apiVersion: 'values.relsync.dev/v1', kind: 'Vault', metadata: { name: 'v-required', namespace: NS }, spec: {} });
    assert.match(missing.said, /spec\.needed: Required value/);
  });

  it('leaves out a Secret\'s and a ConfigMap\'s keys and a label\'s value, and what a typed Secret holds', async () => {
    const secrets = `/api/v1/namespaces/${NS}/secrets`;
    const badKey = await refused(`${secrets}/s-key`, { apiVersion: 'v1', kind: 'Secret', metadata: { name: 's-key', namespace: NS }, stringData: { [`${SECRET} key`]: 'x' } });
    assert.ok(badKey.raw.includes(SECRET), badKey.raw);
    assert.ok(!badKey.said.includes(SECRET), badKey.said);
    assert.match(badKey.said, /data\[…\]: Invalid value: "…": a valid config key must consist of/);
    const docker = await refused(`${secrets}/s-docker`, { apiVersion: 'v1', kind: 'Secret', metadata: { name: 's-docker', namespace: NS }, type: 'kubernetes.io/dockerconfigjson', stringData: { '.dockerconfigjson': `{"auths": ${SECRET}` } });
    assert.ok(!docker.said.includes(SECRET), docker.said);
    assert.match(docker.said, /data\[\.dockerconfigjson\]|data\[…\]/);
    const label = await refused(`/api/v1/namespaces/${NS}/configmaps/c-label`, { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'c-label', namespace: NS, labels: { tier: `${SECRET}!` } } });
    assert.ok(label.raw.includes(SECRET), label.raw);
    assert.ok(!label.said.includes(SECRET), label.said);
    assert.match(label.said, /metadata\.labels: Invalid value: "…"/);
    const long = await refused(`/api/v1/namespaces/${NS}/configmaps/c-long`, { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'c-long', namespace: NS, labels: { tier: `${SECRET}${'x'.repeat(60)}` } } });
    assert.ok(!long.said.includes(SECRET), long.said);
    assert.match(long.said, /metadata\.labels: Invalid value: "…": must be no more than 63 bytes/);
  });

  it('leaves out what an admission policy\'s message quotes, keeping its own words', async () => {
    const path = `/api/v1/namespaces/${NS}/configmaps/c-owner`;
    const object = { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'c-owner', namespace: NS }, data: { owner: SECRET } };
    // A new policy is compiled and takes effect a moment after it is created.
    await eventually('the policy denies', async () => (await send('PATCH', `${path}?fieldManager=relsync-e2e&force=true&dryRun=All`, object, 'application/apply-patch+yaml')).status >= 400);
    const denied = await refused(path, object);
    assert.ok(denied.raw.includes(SECRET), denied.raw);
    assert.ok(!denied.said.includes(SECRET), denied.said);
    assert.match(denied.said, /ValidatingAdmissionPolicy 'no-hunters' with binding 'no-hunters' denied request: owner "…" is not allowed/);
  });

  it('keeps a not-found\'s name, which the path already says, and a namespace that is not there', async () => {
    const answer = await send('GET', `/api/v1/namespaces/${NS}/secrets/nowhere`, undefined);
    const said = new ApiError('GET', `/api/v1/namespaces/${NS}/secrets/nowhere`, answer.status, answer.body).message;
    assert.match(said, /404 NotFound: secrets "nowhere" not found/);
    const missing = await refused('/api/v1/namespaces/gone/configmaps/c', { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'c', namespace: 'gone' } });
    assert.match(missing.said, /namespaces "gone" not found/, 'what relsync reads to make the namespace again (copy-writer.ts)');
  });
});
