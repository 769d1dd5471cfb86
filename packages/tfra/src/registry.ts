import { AlreadyExistsError, checkBoolean, checkName, checkOptions, InvalidArgumentError, invalidParameter } from '@embedstack/core';
import type { TfraKeyDtype } from './keys.js';
import { Variable } from './variable.js';
import { VARIABLE_OPTIONS, type VariableOptions } from './variableOptions.js';
import { stateOf } from './variableState.js';

export interface GetVariableOptions extends VariableOptions {
  /** Return the existing variable of this name instead of failing. Default false. */
  reuse?: boolean | null;
}

/** Variables made by getVariable, by name (a variable leaves when disposed). */
const registry = new Map<string, Variable<TfraKeyDtype>>();

/**
 * TFRA's `get_variable`: the variable called `name`, created with `options` when
 * there is none. Names are unique among variables made here (only here: `new
 * Variable` does not check).
 * With `reuse`, the options given (`dim`, `keyDtype`, `valueDtype`; omitted ones match
 * anything) must agree with the existing variable's, as TF's `get_variable` refuses to
 * share a variable of another shape or dtype.
 * @throws AlreadyExistsError "Variable <name> already exists" unless `reuse`;
 *   InvalidArgumentError when `options.name` differs from `name`, or (reuse) "Trying to
 *   share variable <name>, but specified dim 5 and found dim 2" (likewise keyDtype, valueDtype)
 */
export function getVariable<D extends TfraKeyDtype = 'int64'>(name: string, options: GetVariableOptions & { keyDtype?: D } = {}): Variable<D> {
  checkName(name, 'name');
  const { reuse, ...rest } = checkOptions<GetVariableOptions>(options, [...VARIABLE_OPTIONS, 'reuse']);
  const reuseFlag = checkBoolean(reuse, 'reuse', false);
  if (rest.name !== undefined && rest.name !== null && rest.name !== name) {
    throw invalidParameter('options.name', `omitted or "${name}" (the name argument)`, rest.name);
  }
  const existing = registry.get(name);
  if (existing) {
    if (reuseFlag) {
      checkShared(name, existing, rest);
      return existing as Variable<D>;
    }
    throw new AlreadyExistsError(`Variable ${name} already exists, disallowed: expected name to be unused (or reuse: true) but received "${name}"`, {
      argument: 'name',
    });
  }
  const v = new Variable<D>({ ...rest, name } as VariableOptions & { keyDtype?: D });
  registry.set(name, v as Variable<TfraKeyDtype>);
  stateOf(v)!.onDispose.push(() => {
    if (registry.get(name) === (v as Variable<TfraKeyDtype>)) registry.delete(name);
  });
  return v;
}

/** TF's get_variable sharing check: an option given must equal the existing variable's. @throws InvalidArgumentError */
function checkShared(name: string, existing: Variable<TfraKeyDtype>, given: VariableOptions): void {
  for (const key of ['dim', 'keyDtype', 'valueDtype'] as const) {
    const want = given[key];
    if (want === undefined || want === null || want === existing[key]) continue;
    throw new InvalidArgumentError(`Trying to share variable ${name}, but specified ${key} ${String(want)} and found ${key} ${String(existing[key])}`, { argument: `options.${key}` });
  }
}
