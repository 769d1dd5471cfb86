import { readFileSync } from 'node:fs';
import { arch, platform } from 'node:os';
import { InvalidTypeError, invalidParameter } from '@embedstack/core';

/**
 * x86-64 CPU levels of the prebuilt binaries: `baseline` (x86-64 v1: SSE2, runs on
 * every x86-64 CPU), `avx2` (x86-64 v3: AVX2, FMA, BMI1/2, F16C, MOVBE) and
 * `avx512` (x86-64 v4: AVX-512 F/BW/CD/DQ/VL). Both are compiled without LZCNT
 * (`-mno-lzcnt`), which some VMs hide (AMD EPYC guests whose /proc/cpuinfo lists no
 * `abm`), so such a VM still runs them. Other architectures have one build,
 * reported as `baseline`.
 */
export type CpuLevel = 'baseline' | 'avx2' | 'avx512';

/** Every level, lowest first. */
export const CPU_LEVELS: readonly CpuLevel[] = ['baseline', 'avx2', 'avx512'];

/** The /proc/cpuinfo flags a level needs (what `-march=x86-64-v3` / `-v4 -mno-lzcnt` compile for). */
export const LEVEL_FLAGS: Readonly<Record<CpuLevel, readonly string[]>> = {
  baseline: [],
  avx2: ['avx', 'avx2', 'bmi1', 'bmi2', 'fma', 'f16c', 'movbe'],
  avx512: ['avx', 'avx2', 'bmi1', 'bmi2', 'fma', 'f16c', 'movbe', 'avx512f', 'avx512bw', 'avx512cd', 'avx512dq', 'avx512vl'],
};

/**
 * The levels a CPU runs, lowest first, from the text of /proc/cpuinfo (Linux lists
 * only the features the kernel enabled, so AVX state saving is accounted for).
 * Without it (another OS, or not x86-64) only `baseline`.
 *
 * @param cpuinfo the text of /proc/cpuinfo; default: read it on x86-64 Linux
 * @throws InvalidTypeError when `cpuinfo` is not a string
 */
export function supportedCpuLevels(cpuinfo?: string): CpuLevel[] {
  if (cpuinfo !== undefined && typeof cpuinfo !== 'string') throw invalidParameter('cpuinfo', 'the text of /proc/cpuinfo', cpuinfo, InvalidTypeError);
  const text = cpuinfo ?? readCpuinfo();
  const line = /^flags\s*:(.*)$/m.exec(text);
  if (!line) return ['baseline'];
  const flags = new Set(line[1]!.trim().split(/\s+/));
  return CPU_LEVELS.filter((l) => LEVEL_FLAGS[l].every((f) => flags.has(f)));
}

function readCpuinfo(): string {
  if (platform() !== 'linux' || arch() !== 'x64') return '';
  try {
    return readFileSync('/proc/cpuinfo', 'utf8');
  } catch {
    return '';
  }
}

/** The level asked for with EMBEDSTACK_CPU: null when unset or empty (the best the CPU runs). */
export type LevelRequest =
  | {
      /** The level asked for, or null when EMBEDSTACK_CPU is unset or empty. */
      level: CpuLevel | null;
      /** No problem. */
      problem: null;
    }
  | {
      /** No level: the value is not usable. */
      level: null;
      /** What is wrong with EMBEDSTACK_CPU (not a level, or a level this CPU lacks). */
      problem: string;
    };

/**
 * Reads `EMBEDSTACK_CPU` (baseline | avx2 | avx512). A level the CPU lacks, or any
 * other value, is a problem (the backend is then unusable, saying why). Never throws
 * for a bad value.
 *
 * @throws InvalidTypeError when `env` is not an object
 */
export function requestedCpuLevel(env: NodeJS.ProcessEnv = process.env, supported: readonly CpuLevel[] = supportedCpuLevels()): LevelRequest {
  if (typeof env !== 'object' || env === null) throw invalidParameter('env', 'an environment object (process.env)', env, InvalidTypeError);
  const raw = env.EMBEDSTACK_CPU;
  if (raw === undefined || raw === '') return { level: null, problem: null };
  const value = String(raw).trim().toLowerCase();
  if (!(CPU_LEVELS as readonly string[]).includes(value)) {
    return { level: null, problem: `EMBEDSTACK_CPU=${String(raw)} is not a CPU level: expected one of ${CPU_LEVELS.join(', ')} (or unset it)` };
  }
  const level = value as CpuLevel;
  if (!supported.includes(level)) {
    const needs = LEVEL_FLAGS[level].join(', ');
    return {
      level: null,
      problem:
        `EMBEDSTACK_CPU=${level}, but this CPU (${platform()}-${arch()}) does not run ${level} code (it needs ${needs}); ` +
        `it runs: ${supported.join(', ')}. Unset EMBEDSTACK_CPU or set it to ${supported[supported.length - 1]}`,
    };
  }
  return { level, problem: null };
}

/**
 * The level of the kernels a source build runs: GCC's target_clones (multiversion.h)
 * pick the AVX-512 clone when the CPU has avx512f, else AVX2, else baseline; only on
 * x86-64 Linux built with GCC (elsewhere: baseline).
 */
export function sourceBuildLevel(supported: readonly CpuLevel[] = supportedCpuLevels()): CpuLevel {
  return supported[supported.length - 1] ?? 'baseline';
}
