import { ConfigError } from '../config/config-problem.js';
import { loadConfig } from '../config/load-config.js';

export function validateCommand(options: { config: string }): void {
  try {
    const config = loadConfig(options.config);
    const rules = config.resources.reduce((n, r) => n + r.related.length, 0);
    for (const notice of config.notices ?? []) console.log(`${notice.level === 'warn' ? 'warning' : 'note'}: ${notice.path}: ${notice.message}`);
    console.log(`${options.config}: valid (${config.platformClusters.length} platform cluster(s), ${config.resources.length} resource(s), ${rules} related rule(s))`);
  } catch (err) {
    if (err instanceof ConfigError) {
      console.error(err.message);
      process.exit(2);
    }
    throw err;
  }
}
