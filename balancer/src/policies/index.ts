import { LeastLoadedPolicy } from './least-loaded';
import { PowerOfTwoPolicy } from './power-of-two';
import { RandomPolicy } from './random';
import { RoundRobinPolicy } from './round-robin';
import type { PolicyContext, PolicyName, SlotPolicy } from './slot-policy';
import { LeastRequestPolicy, PlainRoundRobinPolicy } from './unshared';

export * from './slot-policy';

export function createPolicy(name: PolicyName, context: PolicyContext): SlotPolicy {
  switch (name) {
    case 'least-loaded':
      return new LeastLoadedPolicy(context);
    case 'round-robin':
      return new RoundRobinPolicy(context);
    case 'random':
      return new RandomPolicy(context);
    case 'power-of-two':
      return new PowerOfTwoPolicy(context);
    case 'plain-round-robin':
      return new PlainRoundRobinPolicy(context);
    case 'least-request':
      return new LeastRequestPolicy(context, false);
    case 'least-request-p2c':
      return new LeastRequestPolicy(context, true);
  }
}
