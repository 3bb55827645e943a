/**
 * The control plane API tokens the demo launcher makes up for a run (its REST calls go through
 * @headroom/testkit's ControlPlaneApi).
 */
import { randomBytes } from 'node:crypto';

export interface DemoApiTokens {
  /** May read and change (traffic, parallelism, rollback). */
  readonly operator: string;
  /** May only read. */
  readonly viewer: string;
}

/** Recorded in the control plane's audit log as the actor. */
export const apiTokenNames = Object.freeze({ operator: 'demo-operator', viewer: 'demo-viewer' });

export function makeApiTokens(): DemoApiTokens {
  return { operator: randomBytes(18).toString('base64url'), viewer: randomBytes(18).toString('base64url') };
}

/** The control plane CLI's secrets, given by env: command lines are visible to every local user (ps). */
export function controlPlaneSecretsEnv(tokens: DemoApiTokens, unleashAdminToken: string): Record<string, string> {
  return {
    HEADROOM_OPERATOR_TOKENS: `${apiTokenNames.operator}=${tokens.operator}`,
    HEADROOM_VIEWER_TOKENS: `${apiTokenNames.viewer}=${tokens.viewer}`,
    UNLEASH_ADMIN_TOKEN: unleashAdminToken,
  };
}
