/**
 * pino logs, as JSON lines (the default: for collectors) or as text (`--log-format text`: for
 * people). Levels are written as names ("info"), as log collectors and people read them. Each
 * line of a reconcile carries its id (log-context.ts). Secret payloads never reach a log line:
 * relsync logs identities and messages, not objects, and the redact paths below catch a payload
 * that slips into a log call anyway.
 */
import { pino, type DestinationStream, type Logger, type LevelWithSilent } from 'pino';
import { logContext } from './log-context.js';

export const logLevels = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;
export const logFormats = ['json', 'text'] as const;
export type LogFormat = (typeof logFormats)[number];

/** `toStderr`: for commands whose stdout is their result (`relsync sweep -o json`). */
export function createLogger(level: LevelWithSilent = 'info', toStderr = false, format: LogFormat = 'json'): Logger {
  const options = {
    level,
    base: { component: 'relsync' },
    timestamp: pino.stdTimeFunctions.isoTime,
    formatters: { level: (label: string) => ({ level: label }) },
    mixin: logContext,
    redact: {
      paths: ['data', 'stringData', '*.data', '*.stringData', '*.*.data', '*.*.stringData', 'object.data', 'token', '*.token', 'password', '*.password'],
      censor: '[redacted]',
    },
  };
  if (format === 'text') return pino(options, textLines(toStderr ? process.stderr : process.stdout));
  return toStderr ? pino(options, pino.destination({ dest: 2, sync: true })) : pino(options);
}

/**
 * pino's JSON lines as text: `time LEVEL message key=value …`, values that are not plain words
 * quoted as JSON. Written by hand: one short function, where pino-pretty would bring a transport
 * thread and a dozen packages into the image.
 */
export function textLines(out: { write(text: string): unknown }): DestinationStream {
  return {
    write(chunk: string) {
      for (const line of chunk.split('\n')) if (line) out.write(`${textLine(line)}\n`);
    },
  };
}

export function textLine(json: string): string {
  let entry: Record<string, unknown>;
  try {
    entry = JSON.parse(json) as Record<string, unknown>;
  } catch {
    return json;
  }
  const { time, level, msg, component: _component, ...fields } = entry;
  const value = (v: unknown) => (typeof v === 'string' && /^[\w./:@-]+$/.test(v) ? v : quoted(v));
  const rest = Object.entries(fields).map(([k, v]) => `${k}=${value(v)}`);
  // One entry, one line, its fields its own: a message (an API server's text, a webhook's) with a
  // line break, a character that moves text around, or what could pass for a field is quoted.
  const text = String(msg ?? '');
  // eslint-disable-next-line no-control-regex -- control characters are what this finds
  const message = /[\u0000-\u001f\u007f\u0085\u2028\u2029\u202a-\u202e\u2066-\u2069"=]/.test(text) ? `msg=${quoted(text)}` : text;
  return [String(time ?? ''), String(level ?? '').toUpperCase().padEnd(5), message, ...rest].join(' ').trim();
}

/** JSON text, with what JSON leaves as it is but a terminal shows otherwise escaped too: line separators and bidi controls. */
function quoted(v: unknown): string {
  return (JSON.stringify(v) ?? 'undefined').replace(/[\u0085\u2028\u2029\u202a-\u202e\u2066-\u2069]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}
