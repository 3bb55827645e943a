import { z } from 'zod';

/**
 * Keys no map keyed by user input may hold, whatever else it accepts: they name the prototype
 * machinery of a plain object (`map["__proto__"] = v` replaces the prototype instead of adding a
 * key; `map.constructor` is there on every object before anyone sets it).
 */
export const forbiddenMapKeys: readonly string[] = Object.freeze(['__proto__', 'constructor', 'prototype']);

export interface UserKeyedMapOptions {
  /** What one key names, for messages: "integration", "cluster". */
  what: string;
  /** The only keys accepted (configured names); the messages list them. */
  accepted?: readonly string[];
  /** Checks each key when `accepted` is not given. @default any string */
  key?: z.ZodType<string, string>;
}

/**
 * A JSON object keyed by user input (integration or cluster names) with values checked by `value`.
 *
 * Use this, never z.record, for such maps. zod's record copies the keys it accepts into a new
 * object and silently skips an own "__proto__" key (JSON.parse makes one), so nothing after it,
 * refinements included, sees that key: `{"__proto__": "x", "bank-a": 5}` would pass as
 * `{"bank-a": 5}`. Here every key of the raw input is checked first, and a map with any key not
 * accepted (a forbidden one above, or one `accepted`/`key` refuses) fails as a whole, with an
 * issue at that key naming what is accepted. The output holds only accepted keys.
 */
export function userKeyedMap<V extends z.ZodType>(value: V, options: UserKeyedMapOptions): z.ZodType<Record<string, z.output<V>>, unknown> {
  const accepted = options.accepted;
  const acceptedWords = accepted ? `accepted: ${accepted.join(', ') || '(none configured)'}` : `expected ${options.what} names`;
  const keySchema: z.ZodType<string, string> = accepted ? z.enum(accepted as [string, ...string[]]) : (options.key ?? z.string());
  const checkKeys = (input: unknown, ctx: z.RefinementCtx) => {
    // Not an object: the record below says so.
    if (input === null || typeof input !== 'object' || Array.isArray(input)) return input;
    // Object.keys lists own keys, an own "__proto__" included; the prototype's are not the input's.
    for (const key of Object.keys(input)) {
      const problem = forbiddenMapKeys.includes(key)
        ? `reserved name, not ${article(options.what)} ${options.what}; ${acceptedWords}`
        : accepted
          ? accepted.includes(key)
            ? undefined
            : `unknown ${options.what}; ${acceptedWords}`
          : keySchema.safeParse(key).error?.issues[0]?.message;
      if (problem !== undefined) ctx.addIssue({ code: 'custom', path: [key], message: problem, input: key });
    }
    return input;
  };
  // preprocess: the check sees the raw input, and a failed check stops before the record copies it.
  return z.preprocess(checkKeys, z.partialRecord(keySchema, value)) as unknown as z.ZodType<Record<string, z.output<V>>, unknown>;
}

function article(word: string): string {
  return /^[aeiou]/i.test(word) ? 'an' : 'a';
}
