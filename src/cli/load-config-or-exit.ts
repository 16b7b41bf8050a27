import type { Config } from '../config/config.js';
import { ConfigError } from '../config/config-problem.js';
import { loadConfig } from '../config/load-config.js';

/** Loads the config, or prints every problem and exits with code 2. */
export function loadConfigOrExit(file: string): Config {
  try {
    return loadConfig(file);
  } catch (err) {
    if (err instanceof ConfigError) {
      console.error(err.message);
      process.exit(2);
    }
    throw err;
  }
}
