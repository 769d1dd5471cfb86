// Exported classes whose `name` is not a name their module exports them under: what a bundler's
// renaming looks like (esbuild named core's Tensor `_Tensor` until the packages built with
// keepNames), and what users see in messages ("received _Tensor object") and logs. One level of
// plain-object namespaces is searched too (tpu-embedding's `optimizers`). Used by
// require-all.cjs (CommonJS entries) and use-facades.mjs (ESM entries).
'use strict';
const isClass = (v) => typeof v === 'function' && /^class[\s{]/.test(Function.prototype.toString.call(v));
function renamedClasses(m, prefix = '') {
  const out = [];
  for (const [k, v] of Object.entries(m)) {
    if (isClass(v)) {
      if (m[v.name] !== v) out.push(`${prefix}${k} is named ${JSON.stringify(v.name)}`);
    } else if (prefix === '' && v !== null && typeof v === 'object' && Object.getPrototypeOf(v) === Object.prototype) {
      out.push(...renamedClasses(v, `${k}.`));
    }
  }
  return out;
}
module.exports = { renamedClasses };
