// The provider as the checks see it: the same provider, with every error its calls throw (or
// reject with) recorded, so that run-wide checks (typed errors, RetryError delays) can look at
// everything the other checks provoked.

import type { CloudProvider } from '../../shared/cloud/provider.ts';
import type { ObservedError } from './check.ts';
import { capabilities } from './checks/capabilities.ts';

const accessors = new Set<string>(capabilities);

/** `provider`, with each error thrown by a capability's methods pushed onto `sink`. */
export function observe(provider: CloudProvider, sink: ObservedError[]): CloudProvider {
  return new Proxy(provider, {
    get(target, property): unknown {
      const value: unknown = Reflect.get(target, property);
      if (typeof value !== 'function') return value;
      // Called on the provider itself, not the proxy: its private fields are its own.
      if (typeof property !== 'string' || !accessors.has(property))
        return (...args: unknown[]): unknown => Reflect.apply(value, target, args);
      return (...args: unknown[]): unknown => {
        const capability: unknown = Reflect.apply(value, target, args);
        return typeof capability === 'object' && capability !== null
          ? observeCapability(capability, property, sink)
          : capability;
      };
    },
  });
}

function observeCapability(capability: object, name: string, sink: ObservedError[]): object {
  return new Proxy(capability, {
    get(target, property): unknown {
      const value: unknown = Reflect.get(target, property);
      if (typeof property !== 'string' || typeof value !== 'function') return value;
      const call = `${name}().${property}`;
      return (...args: unknown[]): unknown => {
        let result: unknown;
        try {
          result = Reflect.apply(value, target, args);
        } catch (error) {
          sink.push({ call, error });
          throw error;
        }
        if (result instanceof Promise)
          return result.catch((error: unknown) => {
            sink.push({ call, error });
            throw error;
          });
        return result;
      };
    },
  });
}
