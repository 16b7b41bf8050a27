// api-syncagent PublishedResource manifests as relsync config.
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { ConfigError } from '../../../src/config/config-problem.js';
import { parseConfig } from '../../../src/config/load-config.js';
import { translateTemplate } from '../../../src/config/published-resource.js';
import { selectorQuery } from '../../../src/core/label-selector.js';
import { stringsAt } from '../../../src/rules/json-path.js';

const dir = mkdtempSync(join(tmpdir(), 'relsync-pr-'));
const kubeconfig = join(dir, 'kubeconfig');
writeFileSync(kubeconfig, 'apiVersion: v1\nkind: Config\n');

const manifest = `
apiVersion: syncagent.kcp.io/v1alpha1
kind: PublishedResource
metadata:
  name: publish-databases
spec:
  resource:
    apiGroup: demo.relsync.dev
    versions: [v1alpha1]
    kind: Database
  filter:
    resource:
      matchLabels: { tier: gold }
  naming:
    namespace: "$remoteClusterName"
    name: "{{ .Object.metadata.name }}"
  related:
    - identifier: credentials
      origin: service
      kind: Secret
      object:
        reference:
          path: spec.credentialsSecret
          regex: { pattern: "^(.*)$", replacement: "\\\\1-creds" }
    - identifier: config
      origin: kcp
      kind: ConfigMap
      object:
        template:
          template: "{{- .Object.metadata.name -}}-config"
    - identifier: extras
      origin: kcp
      kind: ConfigMap
      object:
        selector:
          matchLabels:
            app: "{{ .Object.metadata.name }}"
          rewrite:
            template:
              template: "{{ .Value }}-copy"
---
`;

function configWith(files: Record<string, string>): string {
  for (const [name, text] of Object.entries(files)) writeFileSync(join(dir, name), text);
  return `
platformClusters: [{ name: tenant-a, kubeconfig: ${kubeconfig} }]
publishedResourceFiles: [${Object.keys(files).join(', ')}]
`;
}

function problems(text: string): string[] {
  try {
    parseConfig(text, join(dir, 'relsync.yaml'));
    return [];
  } catch (err) {
    assert.ok(err instanceof ConfigError, String(err));
    return err.problems.map((p) => `${p.path}: ${p.message}`);
  }
}

describe('PublishedResource manifests', () => {
  it('become published resources with every related rule', () => {
    const config = parseConfig(configWith({ 'pr.yaml': manifest }), join(dir, 'relsync.yaml'));
    assert.equal(config.resources.length, 1);
    const [res] = config.resources as [(typeof config.resources)[0]];
    assert.deepEqual({ ...res.type }, { group: 'demo.relsync.dev', version: 'v1alpha1', kind: 'Database', resource: undefined });
    assert.equal(selectorQuery(res.selector!), 'tier=gold');
    const vars = { cluster: 'ws-1', namespace: 'ns', name: 'db', object: { metadata: { name: 'db' }, spec: { credentialsSecret: 'pw' } } };
    assert.equal(res.naming.namespace.render(vars), 'ws-1');
    assert.equal(res.naming.name.render(vars), 'db');
    const [credentials, cfg, extras] = res.related as [(typeof res.related)[0], (typeof res.related)[0], (typeof res.related)[0]];
    assert.equal(credentials.id, 'credentials');
    assert.equal(credentials.origin, 'service');
    assert.equal(credentials.source.kind, 'Secret');
    assert.equal(credentials.finder.kind, 'reference');
    if (credentials.finder.kind === 'reference') {
      assert.equal(credentials.finder.path.source, '.spec.credentialsSecret');
      assert.ok(credentials.finder.rewrite?.kind === 'regex');
      assert.equal('pw'.replace(credentials.finder.rewrite.pattern, credentials.finder.rewrite.replacement), 'pw-creds', 'Go\'s \\1 became $1');
    }
    assert.equal(cfg.origin, 'platform', 'origin kcp is the platform side');
    assert.ok(cfg.finder.kind === 'template');
    assert.equal(cfg.finder.name.render(vars), 'db-config');
    assert.ok(extras.finder.kind === 'selector');
    assert.equal(extras.finder.requirements[0]!.values[0]!.render(vars), 'db');
    assert.ok(extras.finder.rewrite?.kind === 'template');
    assert.equal(extras.finder.rewrite.template.render({ ...vars, value: 'x', related: {} }), 'x-copy');
  });

  it('keep several versions for relsync to pick one both sides serve; one version stays a version', () => {
    const several = parseConfig(configWith({ 'v.yaml': manifest.replace('versions: [v1alpha1]', 'versions: [v1beta1, v1alpha1]') }), join(dir, 'relsync.yaml'));
    assert.deepEqual([several.resources[0]!.type.version, several.resources[0]!.versions], [undefined, ['v1beta1', 'v1alpha1']]);
    const one = parseConfig(configWith({ 'v.yaml': manifest }), join(dir, 'relsync.yaml'));
    assert.deepEqual([one.resources[0]!.type.version, one.resources[0]!.versions], ['v1alpha1', undefined]);
    assert.match(problems(configWith({ 'v2.yaml': manifest.replace('versions: [v1alpha1]', 'version: v1alpha1\n    versions: [v1alpha1, v1]') })).join('\n'), /spec\.resource\.version: give "version" \(deprecated\) or "versions", not both/);
    const own = `platformClusters: [{ name: tenant-a, kubeconfig: ${kubeconfig} }]\nresources: [{ group: g.example, kind: K, version: v1, versions: [v1, v2] }]\n`;
    assert.match(problems(own).join('\n'), /resources\[0\]\.versions: give "version" or "versions", not both/);
  });

  it('sit beside relsync\'s own resources', () => {
    const text = `${configWith({ 'pr.yaml': manifest })}resources: [{ resource: secrets }]\n`;
    const config = parseConfig(text, join(dir, 'relsync.yaml'));
    assert.equal(config.resources.length, 2);
  });

  it('read enableWorkspacePaths: the path is `clusterPath` in templates, and only there', () => {
    const withPath = manifest.replace('"{{- .Object.metadata.name -}}-config"', '"{{ .ClusterPath | replace \\":\\" \\"-\\" }}-config"');
    const config = parseConfig(configWith({ 'paths.yaml': withPath.replace('  filter:', '  enableWorkspacePaths: true\n  filter:') }), join(dir, 'relsync.yaml'));
    const resource = config.resources[0]!;
    assert.equal(resource.workspacePath, true);
    const rule = resource.related[1]!;
    assert.ok(rule.finder.kind === 'template');
    assert.equal(rule.finder.name.render({ cluster: '2x7yq', clusterPath: 'root:org:team', namespace: 'default', name: 'db', object: {} }), 'root-org-team-config');
    // Without it the path would render empty, and two workspaces' names would meet: refused, naming the field.
    const found = problems(configWith({ 'bad.yaml': withPath })).join('\n');
    assert.match(found, /publishedResourceFiles\[0\] \(bad\.yaml\) PublishedResource 1 \(as resources\[0\]\.related\[1\]\.template\.name\): \{\{ clusterPath \}\} is the primary's kcp workspace path, read only with workspacePath: true .*spec\.enableWorkspacePaths/);
    const origin = problems(configWith({ 'bad.yaml': manifest.replace('origin: kcp\n      kind: ConfigMap\n      object:\n        selector', 'origin: elsewhere\n      kind: ConfigMap\n      object:\n        selector') })).join('\n');
    assert.match(origin, /document 1 spec\.related\[2\]\.origin: must be "kcp" or "service"/);
    const own = `platformClusters: [{ name: tenant-a, kubeconfig: ${kubeconfig} }]\nresources: [{ group: g.example, kind: K, version: v1, naming: { name: '{{ hash clusterPath name }}' } }]\n`;
    assert.match(problems(own).join('\n'), /resources\[0\]\.naming\.name: \{\{ clusterPath \}\} .* workspacePath: true on resources\[0\]/);
    assert.match(problems(configWith({ 'v.yaml': manifest.replace('"{{- .Object.metadata.name -}}-config"', '"{{ .ClusterID }}-config"') })).join('\n'), /\.ClusterID is not available in relsync/);
  });

  it('read a related type by group, version and resource, and its projection as the destination: ConfigMap ↔ Secret or nothing', () => {
    const related = (extra: string) => manifest.replace('    - identifier: config\n      origin: kcp\n      kind: ConfigMap\n', `    - identifier: config\n      origin: kcp\n${extra}`);
    const config = parseConfig(configWith({ 'proj.yaml': related('      resource: configmaps\n      version: v1\n      projection: { resource: secrets }\n') }), join(dir, 'relsync.yaml'));
    const cfg = config.resources[0]!.related[1]!;
    assert.deepEqual([{ ...cfg.source }, { ...cfg.destination }], [{ group: '', version: 'v1', resource: 'configmaps', kind: undefined }, { group: '', version: 'v1', resource: 'secrets' }]);
    const byKind = parseConfig(configWith({ 'proj.yaml': related('      kind: Secret\n      projection: { resource: configmaps }\n') }), join(dir, 'relsync.yaml'));
    assert.deepEqual({ ...byKind.resources[0]!.related[1]!.destination }, { group: '', resource: 'configmaps' });

    const found = problems(configWith({ 'proj.yaml': related('      kind: ConfigMap\n      projection: { group: demo.relsync.dev, resource: databases }\n') }));
    assert.equal(found.length, 1, found.join('\n'));
    assert.match(found[0]!, /^publishedResourceFiles\[0\] \(proj\.yaml\) document 1 spec\.related\[1\]\.projection: .*cannot copy kind ConfigMap as databases\.demo\.relsync\.dev/);
  });

  it('point a problem found after translation back at the manifest', () => {
    // A function relsync's template parser does not know is found after translation.
    const found = problems(configWith({ 'pr2.yaml': manifest.replace('"{{- .Object.metadata.name -}}-config"', '"{{ .Object.metadata.name | nosuchfunction }}"') }));
    assert.equal(found.length, 1, found.join('\n'));
    assert.match(found[0]!, /^publishedResourceFiles\[0\] \(pr2\.yaml\) PublishedResource 1 \(as resources\[0\]\.related\[1\]\.template\.name\): .*nosuchfunction/);
  });

  it('refuse a document that is not a PublishedResource, and a missing file', () => {
    assert.match(problems(configWith({ 'cm.yaml': 'apiVersion: v1\nkind: ConfigMap\n' })).join('\n'), /cm\.yaml\) document 1: expected apiVersion syncagent\.kcp\.io\/v1alpha1 and kind PublishedResource/);
    const missing = `platformClusters: [{ name: tenant-a, kubeconfig: ${kubeconfig} }]\npublishedResourceFiles: [nope.yaml]\n`;
    assert.match(problems(missing).join('\n'), /publishedResourceFiles\[0\]: cannot read .*nope\.yaml/);
  });

  it('refuse a field relsync does not know, at every level, instead of dropping it', () => {
    const found = problems(configWith({
      'typo.yaml': manifest
        .replace('  filter:', '  conflictHandling: adopt\n  filter:')
        .replace('    kind: Database\n', '    kind: Database\n    scope: Namespaced\n')
        .replace('    - identifier: config\n', '    - identifier: config\n      cleanUp: true\n')
        .replace('        template:\n          template: "{{- .Object', '        templte: {}\n        template:\n          template: "{{- .Object'),
    }));
    const all = found.join('\n');
    assert.match(all, /document 1 spec\.conflictHandling: unknown field/);
    assert.match(all, /document 1 spec\.resource\.scope: unknown field/);
    assert.match(all, /document 1 spec\.related\[1\]\.cleanUp: unknown field/);
    assert.match(all, /document 1 spec\.related\[1\]\.object\.templte: unknown field/);
    assert.equal(found.length, 4, all);
  });

  it('skip a manifest whose synchronization is disabled, as api-syncagent does, and say so', () => {
    const disabled = manifest.replace('  filter:', '  synchronization: { enabled: false }\n  filter:');
    const nulled = manifest.replace('  filter:', '  synchronization:\n  filter:').replace('kind: Database', 'kind: Backup');
    const enabled = manifest.replace('  filter:', '  synchronization: { enabled: true }\n  filter:').replace('kind: Database', 'kind: Restore');
    const config = parseConfig(configWith({ 'sync.yaml': `${disabled}\n${nulled}\n${enabled}` }), join(dir, 'relsync.yaml'));
    assert.deepEqual(config.resources.map((r) => r.type.kind), ['Backup', 'Restore'], 'synchronization: (null) is absent, as the API server prunes it: synced');
    const warnings = config.notices?.filter((n) => n.level === 'warn' && n.path.endsWith('synchronization.enabled'));
    assert.deepEqual(warnings?.map((n) => n.path), ['publishedResourceFiles[0] (sync.yaml) document 1 spec.synchronization.enabled']);
    assert.match(warnings![0]!.message, /PublishedResource "publish-databases" is not synced: its synchronization is disabled/);
    // Nothing left to sync: the error says why.
    assert.match(problems(configWith({ 'only.yaml': disabled })).join('\n'), /give at least one published resource[\s\S]*\(note\) PublishedResource "publish-databases" is not synced/);
    // A disabled manifest is still checked: a typo in it, or in synchronization itself, is not skipped with it.
    assert.match(problems(configWith({ 'bad.yaml': disabled.replace('  filter:', '  filtre: {}\n  filter:') })).join('\n'), /spec\.filtre: unknown field/);
    const typo = problems(configWith({ 'typo.yaml': manifest.replace('  filter:', '  synchronization: { enable: true }\n  filter:') }));
    assert.match(typo.join('\n'), /spec\.synchronization\.enable: unknown field/);
    // Its CRD requires enabled, as a boolean: {} and "yes" (a string in YAML 1.2) are errors, not "disabled".
    assert.match(problems(configWith({ 'empty.yaml': manifest.replace('  filter:', '  synchronization: {}\n  filter:') })).join('\n'), /spec\.synchronization\.enabled: required when synchronization is given/);
    assert.match(problems(configWith({ 'yes.yaml': manifest.replace('  filter:', '  synchronization: { enabled: yes }\n  filter:') })).join('\n'), /spec\.synchronization\.enabled: must be true or false, got "yes"/);
  });

  it('read a null field as absent everywhere, as the API server prunes it', () => {
    const nulls = manifest
      .replace('  filter:', '  projection: null\n  mutation: null\n  filter:\n    namespace: null')
      .replace('          regex: { pattern: "^(.*)$", replacement: "\\\\1-creds" }', '          regex: { pattern: "^(.*)$", replacement: "\\\\1-creds" }\n        selector: null\n        namespace: null')
      .replace('    - identifier: config\n', '    - identifier: config\n      mutation: null\n      group: null\n');
    const config = parseConfig(configWith({ 'n.yaml': nulls }), join(dir, 'relsync.yaml'));
    const finder = config.resources[0]!.related[0]!.finder;
    assert.ok(finder.kind === 'reference' && finder.rewrite?.kind === 'regex');
    assert.equal('pw'.replace(finder.rewrite.pattern, finder.rewrite.replacement), 'pw-creds');
    const noRegex = parseConfig(configWith({ 'n2.yaml': manifest.replace('          regex: { pattern: "^(.*)$", replacement: "\\\\1-creds" }', '          regex: null') }), join(dir, 'relsync.yaml'));
    const plain = noRegex.resources[0]!.related[0]!.finder;
    assert.ok(plain.kind === 'reference');
    assert.equal(plain.rewrite, undefined, 'regex: null is no rewrite, not "replace everything with nothing"');
  });

  it('accept empty projection and mutation blocks, which change nothing, and refuse any that would', () => {
    const noop = manifest
      .replace('  filter:', '  projection: { shortNames: [], categories: [] }\n  mutation: { spec: [], status: [] }\n  filter:')
      .replace('    - identifier: config\n', '    - identifier: config\n      mutation: { spec: [] }\n');
    assert.equal(parseConfig(configWith({ 'noop.yaml': noop }), join(dir, 'relsync.yaml')).resources.length, 1);
    for (const [block, path] of [
      ['  projection: { scope: Sideways }\n', /spec\.projection\.scope: must be "Namespaced" or "Cluster"/],
      ['  projection: { versions: [v1] }\n', /spec\.projection\.versions: must map each version/],
      ['  projection: { plurl: dbs }\n', /spec\.projection\.plurl: unknown field/],
      ['  mutation: { spec: [{ delete: { path: metadata.labels.x } }] }\n', /PublishedResource 1 \(as resources\[0\]\.mutation\.spec\[0\]\.delete\.path\): a spec mutation names a copied field/],
      ['  mutation: { spec: [{ delete: { path: "spec.items.#.x" } }] }\n', /\(as resources\[0\]\.mutation\.spec\[0\]\.delete\.path\): a mutation names one value: no wildcards/],
      ['  mutation: { spec: [{ delet: { path: spec.x } }] }\n', /spec\.mutation\.spec\[0\]\.delet: unknown field/],
    ] as const) {
      assert.match(problems(configWith({ 'p.yaml': manifest.replace('  filter:', `${block}  filter:`) })).join('\n'), path, block);
    }
    assert.match(problems(configWith({ 'n.yaml': manifest.replace('    name: "{{ .Object.metadata.name }}"', '    name: 7') })).join('\n'), /spec\.naming\.name: must be a string, got 7/);
  });

  it("read a primary's projection: spec.resource is the copies' type in the service cluster, the projection the primaries' on the platforms", () => {
    const typesOf = (block: string, resource = '    apiGroup: demo.relsync.dev\n    versions: [v1alpha1]\n    kind: Database\n') => {
      const text = manifest.replace('    apiGroup: demo.relsync.dev\n    versions: [v1alpha1]\n    kind: Database\n', resource).replace('  filter:', `${block}  filter:`);
      const r = parseConfig(configWith({ 'p.yaml': text }), join(dir, 'relsync.yaml')).resources[0]!;
      return { type: r.type, copyAs: r.copyAs };
    };
    assert.deepEqual(typesOf('  projection: { group: platform.example.com }\n'), {
      type: { group: 'platform.example.com', version: 'v1alpha1', resource: undefined, kind: 'Database' },
      copyAs: { group: 'demo.relsync.dev', version: 'v1alpha1', resource: undefined, kind: 'Database' },
    });
    assert.deepEqual(typesOf('  projection: { kind: Store, plural: stores, versions: { v1alpha1: v1 }, scope: Namespaced, shortNames: [st] }\n').type, { group: 'demo.relsync.dev', version: 'v1', resource: 'stores', kind: undefined }, 'the plural names the type; the version is mapped');
    assert.deepEqual(typesOf('  projection: { kind: Store, version: v2 }\n').type, { group: 'demo.relsync.dev', version: 'v2', resource: undefined, kind: 'Store' }, 'the deprecated version: whatever the service version');
    assert.deepEqual(typesOf('  projection: { shortNames: [db] }\n'), { type: { group: 'demo.relsync.dev', version: 'v1alpha1', resource: undefined, kind: 'Database' }, copyAs: undefined }, 'shortNames only: nothing projected');
    const unversioned = problems(configWith({ 'u.yaml': manifest.replace('    versions: [v1alpha1]\n', '').replace('  filter:', '  projection: { versions: { v1alpha1: v1 } }\n  filter:') }));
    assert.match(unversioned.join('\n'), /spec\.projection\.versions: maps versions, but spec\.resource names none/, 'a map nothing reads is not dropped silently');
    const several = problems(configWith({ 's.yaml': manifest.replace('versions: [v1alpha1]', 'versions: [v1alpha1, v1]').replace('  filter:', '  projection: { group: platform.example.com }\n  filter:') }));
    assert.match(several.join('\n'), /spec\.projection: a projection of several versions: relsync syncs one version/);
  });

  it('check every level of a related rule, and booleans as booleans', () => {
    const withField = (extra: string) => manifest.replace('    - identifier: credentials\n      origin: service\n', `    - identifier: credentials\n      origin: service\n${extra}`);
    const regexTypo = problems(configWith({ 'r.yaml': manifest.replace('replacement: "\\\\1-creds"', 'replacment: "\\\\1-creds"') }));
    assert.deepEqual(regexTypo.map((p) => p.replace(/ \(a PublishedResource.*$/, '')), ['publishedResourceFiles[0] (r.yaml) document 1 spec.related[0].object.reference.regex.replacment: unknown field'], 'a dropped replacement would copy whatever the tenant names');
    const selectorTypo = problems(configWith({ 's.yaml': manifest.replace('          rewrite:\n', '          matchExpresions: []\n          rewrite:\n') }));
    assert.match(selectorTypo.join('\n'), /spec\.related\[2\]\.object\.selector\.matchExpresions: unknown field/);
    assert.match(problems(configWith({ 'w.yaml': withField('      watch: { byOwnr: {} }\n') })).join('\n'), /spec\.related\[0\]\.watch\.byOwnr: unknown field/);
    assert.match(problems(configWith({ 'p.yaml': withField('      projection: { kind: Secret }\n') })).join('\n'), /spec\.related\[0\]\.projection\.kind: unknown field/);
    assert.match(problems(configWith({ 'b.yaml': withField('      syncStatus: "true"\n') })).join('\n'), /spec\.related\[0\]\.syncStatus: must be true or false, got "true"/);
    assert.match(problems(configWith({ 'c.yaml': withField('      cleanup: yes\n') })).join('\n'), /spec\.related\[0\]\.cleanup: must be true or false/);
    assert.match(problems(configWith({ 'e.yaml': manifest.replace('  filter:', '  enableWorkspacePaths: "false"\n  filter:') })).join('\n'), /spec\.enableWorkspacePaths: must be true or false/);
    assert.deepEqual(problems(configWith({ 'h.yaml': withField('      identityHash: ""\n      cleanupPolicy: MatchOrigin\n') })), [], 'an empty identityHash is unset, as in Go');
  });

  it('refuse related fields whose meaning relsync does not give, and accept those it does', () => {
    const withField = (extra: string) => manifest.replace('    - identifier: config\n      origin: kcp\n', `    - identifier: config\n      origin: kcp\n${extra}`);
    const refused: Array<[string, RegExp]> = [
      ['      identityHash: abc\n', /\(as resources\[0\]\.related\[1\]\.identityHash\): must be an APIExport's status\.identityHash \(64 hex digits\)/],
      ['      cleanupPolicy: Sometimes\n', /spec\.related\[1\]\.cleanupPolicy: must be "Orphan", "OnPrimaryDeletion" or "MatchOrigin", got "Sometimes"/],
    ];
    for (const [extra, expected] of refused) {
      const found = problems(configWith({ 'rel.yaml': withField(extra) }));
      assert.equal(found.length, 1, `${extra}: ${found.join('\n')}`);
      assert.match(found[0]!, expected);
    }
    const hash = 'b55b1895f22c7c9b27786e1b2c6b3e4c700b6d601aa1080eb7f7f8854996ebe8';
    assert.equal(parseConfig(configWith({ 'id.yaml': withField(`      identityHash: ${hash}\n`) }), join(dir, 'relsync.yaml')).resources[0]!.related[1]!.identityHash, hash, 'another export\'s type, checked against the claim at start');
    assert.match(problems(configWith({ 'st.yaml': withField('      syncStatus: true\n') })).join('\n'), /\(as resources\[0\]\.related\[1\]\.syncStatus\): ConfigMaps and Secrets have no status to copy/);
    const certificates = manifest.replace('    - identifier: config\n      origin: kcp\n      kind: ConfigMap\n', '    - identifier: config\n      origin: kcp\n      group: cert-manager.io\n      version: v1\n      resource: certificates\n      syncStatus: true\n');
    assert.equal(parseConfig(configWith({ 'st.yaml': certificates }), join(dir, 'relsync.yaml')).resources[0]!.related[1]!.syncStatus, true, 'syncStatus: the related object\'s status goes with it');
    for (const extra of ['      syncStatus: false\n', '      cleanupPolicy: MatchOrigin\n', '      cleanup: true\n      cleanupPolicy: MatchOrigin\n', '      watch: { byOwner: {} }\n', '      cleanup: true\n', '      cleanupPolicy: Orphan\n']) {
      assert.deepEqual(problems(configWith({ 'rel.yaml': withField(extra) })), [], extra);
    }
  });

  it("read an origin: service rule's cleanup policy as api-syncagent does, Orphan by default, and say when an origin: kcp rule's has no effect", () => {
    const policyOf = (extra: string, identifier = 'credentials') => {
      const text = manifest.replace(`    - identifier: ${identifier}\n`, `    - identifier: ${identifier}\n${extra}`);
      const config = parseConfig(configWith({ 'c.yaml': text }), join(dir, 'relsync.yaml'));
      const index = config.resources[0]!.related.findIndex((r) => r.id === identifier);
      const notices = (config.notices ?? []).filter((n) => n.path.includes(`spec.related[${index}]`)).map((n) => `${n.path}: ${n.message}`);
      return { policy: config.resources[0]!.related[index]!.cleanup, notices };
    };
    const unset = policyOf('');
    assert.equal(unset.policy, 'Orphan', "unset is api-syncagent's default");
    assert.equal(unset.notices.length, 1, 'said at start, since earlier relsync releases read it otherwise');
    assert.match(unset.notices[0]!, /spec\.related\[0\]\.cleanupPolicy: no cleanup policy: Orphan, api-syncagent's default.*set cleanupPolicy: MatchOrigin/);
    assert.deepEqual(policyOf('      cleanupPolicy: Orphan\n').notices, [], 'a policy given is not remarked on');
    assert.equal(policyOf('      cleanup: false\n').policy, 'Orphan');
    assert.equal(policyOf('      cleanup: true\n').policy, 'OnPrimaryDeletion', 'the deprecated cleanup: true');
    assert.equal(policyOf('      cleanup: true\n      cleanupPolicy: Orphan\n').policy, 'Orphan', 'cleanupPolicy wins over cleanup');
    assert.equal(policyOf('      cleanupPolicy: MatchOrigin\n').policy, 'MatchOrigin');
    assert.deepEqual(policyOf('', 'config'), { policy: 'MatchOrigin', notices: [] }, 'origin kcp: copies in the service cluster follow their origin');
    const orphanKcp = policyOf('      cleanupPolicy: Orphan\n', 'config');
    assert.equal(orphanKcp.policy, 'MatchOrigin');
    assert.equal(orphanKcp.notices.length, 1);
    assert.match(orphanKcp.notices[0]!, /spec\.related\[1\]\.cleanupPolicy: cleanup policy Orphan has no effect on an origin: kcp rule/);
  });

  it('read gjson reference paths as relsync paths, and refuse what only gjson does', () => {
    const pathOf = (path: string) => {
      const config = parseConfig(configWith({ 'g.yaml': manifest.replace('path: spec.credentialsSecret', `path: '${path}'`) }), join(dir, 'relsync.yaml'));
      const finder = config.resources[0]!.related[0]!.finder;
      assert.ok(finder.kind === 'reference');
      return finder.path;
    };
    const object = { spec: { items: [{ name: 'a' }, { name: 'b' }], list: ['x', 'y'], '#': 'hash', '1': 'one', $ref: 'dollar' }, metadata: { annotations: { 'example.com/secret': 'z', '8080': 'port', 'a|b': 'pipe' } } };
    for (const [gjson, expected, found] of [
      ['spec.items.#.name', '.spec.items[*].name', ['a', 'b']],
      ['spec.list.1', '.spec.list.1', ['y']],
      ['metadata.annotations.8080', '.metadata.annotations.8080', ['port'], 'a number on an object is its key, as in gjson'],
      ['metadata.annotations.example\\.com/secret', ".metadata.annotations['example.com/secret']", ['z']],
      ['metadata.annotations.a\\|b', ".metadata.annotations['a|b']", ['pipe'], 'an escaped pipe is part of the key'],
      ['spec.\\#', ".spec['#']", ['hash'], 'an escaped # is a key'],
      ['spec.\\1', ".spec['1']", ['one']],
      ['spec.$ref', '.spec.$ref', ['dollar'], 'a leading $ is part of the key in gjson'],
      ['$ref', '.$ref', []],
      ['$.spec.list[0]', '$.spec.list[0]', ['x'], "relsync's $. form, as before"],
      ['.spec.list[0]', '.spec.list[0]', ['x'], "relsync's own form"],
    ] as const) {
      const path = pathOf(gjson);
      assert.equal(path.source, expected, gjson);
      assert.deepEqual(stringsAt(path, object).values, found, gjson);
    }
    for (const [gjson, expected] of [
      ['spec.items.#', /a trailing "#" counts/],
      ['spec.items.#(name=="a").name', /queries .* are not supported/],
      ['spec.items|@reverse', /queries .* are not supported/],
      ['spec.it*ms.0', /wildcards/],
      ['spec..name', /empty segment 2/],
      ['metadata.annotations.example\\.com/x|y', /pipes/, 'an escape earlier in the segment does not hide a pipe'],
      ['spec.items[0].name', /brackets are not gjson/],
      ['spec.name\\', /ends in an escape/],
      ['spec.{a,b}', /multipaths/],
    ] as const) {
      const found = problems(configWith({ 'g.yaml': manifest.replace('path: spec.credentialsSecret', `path: '${gjson}'`) }));
      assert.equal(found.length, 1, `${gjson}: ${found.join('\n')}`);
      assert.match(found[0]!, /document 1 spec\.related\[0\]\.object\.reference\.path: gjson path/);
      assert.match(found[0]!, expected);
    }
  });

  it('translate Go template variables and leave functions to relsync', () => {
    assert.deepEqual(translateTemplate('{{ .ClusterName }}-{{ .Object.spec.tier | lower }}'), { template: '{{ cluster }}-{{ object.spec.tier | lower }}' });
    assert.deepEqual(translateTemplate('plain'), { template: 'plain' });
    assert.match(translateTemplate('{{ .Nope }}').problem ?? '', /\.Nope is not available/);
  });
});
