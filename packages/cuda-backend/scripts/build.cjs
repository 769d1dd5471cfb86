// Builds the native addon with cmake-js into build/ (or --out DIR): device code
// when nvcc is found (EMBEDSTACK_CUDA=auto, the default; =on requires it, =off
// builds the host mode only), for EMBEDSTACK_CUDA_ARCHITECTURES (default "80;90").
// Says which it builds. Exits non-zero when the build fails.
//   node scripts/build.cjs [--rebuild] [--out DIR] [--asan]
'use strict';
const { spawnSync } = require('node:child_process');
const { existsSync } = require('node:fs');
const { join } = require('node:path');

const root = join(__dirname, '..');
const argv = process.argv.slice(2);
const option = (name) => {
  const i = argv.indexOf(name);
  return i >= 0 ? argv[i + 1] : undefined;
};
const out = option('--out') ?? 'build';
const mode = (process.env.EMBEDSTACK_CUDA ?? 'auto').toLowerCase();
const note = (msg) => console.warn(`[@embedstack/cuda-backend] ${msg}`);

/** nvcc on PATH, CUDACXX, or the toolkit's default location. */
function findNvcc() {
  const candidates = [process.env.CUDACXX, 'nvcc', '/usr/local/cuda/bin/nvcc'].filter(Boolean);
  for (const c of candidates) {
    const r = spawnSync(c, ['--version'], { stdio: 'ignore', timeout: 10000 });
    if (r.error === undefined && r.status === 0) return c;
  }
  return null;
}

module.exports = { findNvcc };

if (require.main === module) {
  const nvcc = mode === 'off' || argv.includes('--asan') ? null : findNvcc();
  if (mode === 'on' && !nvcc) {
    note('EMBEDSTACK_CUDA=on but nvcc was not found (install the CUDA toolkit or set CUDACXX)');
    process.exit(1);
  }
  const env = { ...process.env, EMBEDSTACK_CUDA: nvcc ? 'on' : 'off' };
  if (nvcc && !process.env.CUDACXX && nvcc !== 'nvcc') env.CUDACXX = nvcc;
  if (nvcc) {
    note(`building device code with ${nvcc} for CUDA architectures ${process.env.EMBEDSTACK_CUDA_ARCHITECTURES || '80;90'}, plus the host mode`);
  } else {
    note(
      mode === 'off'
        ? 'EMBEDSTACK_CUDA=off: building the host mode only (backend "cuda-host")'
        : 'nvcc not found: building the host mode only (backend "cuda-host"; install the CUDA toolkit and rebuild for GPUs)',
    );
  }

  let cli;
  try {
    cli = require.resolve('cmake-js/bin/cmake-js', { paths: [root] });
  } catch {
    note('cmake-js is not installed: run the install first');
    process.exit(1);
  }
  const args = [cli, argv.includes('--rebuild') ? 'rebuild' : 'compile', '--out', out, '--log-level', 'warn'];
  if (argv.includes('--asan')) args.push('--CDEMBEDSTACK_ASAN=ON', '--debug');
  if (!existsSync(join(root, 'CMakeLists.txt'))) {
    note('CMakeLists.txt is missing: the package is incomplete');
    process.exit(1);
  }
  const r = spawnSync(process.execPath, args, { cwd: root, stdio: 'inherit', env });
  process.exit(r.status ?? 1);
}
