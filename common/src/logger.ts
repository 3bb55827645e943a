import pino, { type Logger } from 'pino';

export type { Logger };

/** The logger CLIs create; libraries take one as an option and default to silence. */
export function createLogger(name: string, level = process.env.LOG_LEVEL ?? 'info'): Logger {
  return pino({ name, level });
}

export const silentLogger: Logger = pino({ level: 'silent' });
