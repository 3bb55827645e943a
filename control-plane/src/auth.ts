import { createHash, timingSafeEqual } from 'node:crypto';
import type { NextFunction, Request, Response } from 'express';
import { HeadroomError } from '@headroom/common';
import type { ApiToken, Role } from './config';
import { apiErrorCodes } from './errors';

export interface Caller {
  name: string;
  role: Role;
}

/**
 * Bearer tokens. Each presented token is hashed and compared with every configured one in
 * constant time (no early exit), so neither the match nor its position leaks through timing.
 */
export class TokenAuth {
  private readonly digests: { digest: Buffer; caller: Caller }[];

  constructor(tokens: readonly ApiToken[]) {
    this.digests = tokens.map((t) => ({ digest: sha256(t.token), caller: { name: t.name, role: t.role } }));
  }

  identify(header: string | undefined): Caller | undefined {
    const match = /^Bearer (\S+)$/i.exec(header ?? '');
    if (!match) return undefined;
    const presented = sha256(match[1]!);
    let found: Caller | undefined;
    for (const { digest, caller } of this.digests) {
      if (timingSafeEqual(digest, presented)) found = caller;
    }
    return found;
  }

  /** Express middleware: reads need any valid token, changes (not GET/HEAD) an operator's. */
  middleware() {
    return (request: Request, response: Response, next: NextFunction) => {
      const caller = this.identify(request.headers.authorization);
      if (!caller) {
        response.setHeader('www-authenticate', 'Bearer realm="headroom"');
        return next(new HeadroomError(apiErrorCodes.unauthenticated, 'a valid API token is required: send "Authorization: Bearer <token>"'));
      }
      const reads = request.method === 'GET' || request.method === 'HEAD';
      if (!reads && caller.role !== 'operator') {
        return next(new HeadroomError(apiErrorCodes.forbidden, `token "${caller.name}" is a viewer's: changes need an operator's token; nothing was changed`));
      }
      response.locals.caller = caller;
      next();
    };
  }
}

function sha256(value: string): Buffer {
  return createHash('sha256').update(value, 'utf8').digest();
}
