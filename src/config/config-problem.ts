/** What is wrong with a config, at the path of the field to change (`resources[0].related[1].reference.path`). */
export interface ConfigProblem {
  readonly path: string;
  readonly message: string;
}

/** What a config reads and deliberately does not act on, or acts on differently than its source format would: for the log. */
export interface ConfigNotice extends ConfigProblem {
  readonly level: 'info' | 'warn';
}

export class ConfigError extends Error {
  constructor(
    readonly file: string,
    readonly problems: readonly ConfigProblem[],
  ) {
    super(`${file}: invalid config\n${problems.map((p) => `  ${p.path || '(top level)'}: ${p.message}`).join('\n')}`);
    this.name = 'ConfigError';
  }
}
