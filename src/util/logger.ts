/**
 * pino JSON logs. Secret payloads never reach a log line: relsync logs
 * identities and messages, not objects, and the redact paths below catch a
 * payload that slips into a log call anyway.
 */
import { pino, type Logger, type LevelWithSilent } from 'pino';

export const logLevels = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;

/** `toStderr`: for commands whose stdout is their result (`relsync sweep -o json`). */
export function createLogger(level: LevelWithSilent = 'info', toStderr = false): Logger {
  const options = {
    level,
    base: { component: 'relsync' },
    timestamp: pino.stdTimeFunctions.isoTime,
    redact: {
      paths: ['data', 'stringData', '*.data', '*.stringData', '*.*.data', '*.*.stringData', 'object.data', 'token', '*.token', 'password', '*.password'],
      censor: '[redacted]',
    },
  };
  return toStderr ? pino(options, pino.destination({ dest: 2, sync: true })) : pino(options);
}
