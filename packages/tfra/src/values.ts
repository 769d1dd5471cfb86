import type { ValuesInput } from '@embedstack/core';

/** What a Variable takes as values: flat [n*dim], number[], or a float32 Tensor of shape keys.shape + [dim]. */
export type VariableValues = ValuesInput;
