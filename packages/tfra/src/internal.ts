/** Key of the members other modules of this package use on Variables (not public API). */
export const INTERNAL: unique symbol = Symbol('embedstack.tfra.internal');
