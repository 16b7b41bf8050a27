/**
 * Regular expressions relsync runs on values a tenant controls (mutation rules), compiled for V8's
 * linear-time engine: no pattern, however written, backtracks on a tenant's string (`(\w+\s?)*$`
 * on 60 characters takes minutes with the default engine). That engine, like Go's RE2 that
 * api-syncagent uses, has no backreferences or lookarounds; such a pattern is refused when the
 * config is loaded, as is Go syntax JavaScript would read as something else (`\z`, `\A`, `\Q…\E`,
 * `\pL`, `[[:alpha:]]`: the linear engine has no unicode mode, which would refuse unknown escapes).
 * The engine is behind a V8 flag, set once when this module loads, before any pattern is compiled
 * with it.
 */
import { setFlagsFromString } from 'node:v8';

setFlagsFromString('--enable-experimental-regexp-engine');

/** Throws with what is wrong (a pattern the linear engine cannot run, Go-only syntax). */
export function linearRegExp(pattern: string, flags = ''): RegExp {
  // Go's POSIX classes (`[[:alpha:]]`) would silently mean a set of punctuation and letters here.
  if (/\[\[:\^?[a-z]+:\]/.test(pattern)) throw new Error('POSIX character classes ([[:alpha:]]) are Go syntax; write the class out ([A-Za-z])');
  for (let i = 0; i < pattern.length; i++) {
    if (pattern[i] !== '\\') continue;
    const escaped = pattern[++i] ?? '';
    if (escaped !== '' && 'AzQEpPC'.includes(escaped)) throw new Error(`\\${escaped} is Go syntax that JavaScript reads as the letter ${escaped}; write the pattern without it ($ for \\z, ^ for \\A, an escaped text for \\Q…\\E, a class for \\p)`);
  }
  try {
    return new RegExp(pattern, `${flags}l`);
  } catch (err) {
    const message = (err as Error).message;
    if (/linear time/.test(message)) throw new Error(`${message}: relsync runs these patterns in linear time, as Go's RE2 does, so backreferences and lookarounds are not supported`, { cause: err });
    throw err;
  }
}
