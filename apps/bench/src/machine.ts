/** What the figures were measured on: machine and versions (for --json and the README). */
import { createRequire } from 'node:module';
import os from 'node:os';

const require = createRequire(import.meta.url);

export interface MachineInfo {
  cpuModel: string;
  cores: number;
  memoryBytes: number;
  platform: string;
  arch: string;
  /** 1, 5 and 15 minute load averages when the run started (other processes skew figures). */
  loadAverage: number[];
}

export function machineInfo(): MachineInfo {
  const cpus = os.cpus();
  return {
    cpuModel: cpus[0]?.model.trim() ?? 'unknown',
    cores: cpus.length,
    memoryBytes: os.totalmem(),
    platform: `${os.platform()} ${os.release()}`,
    arch: os.arch(),
    loadAverage: os.loadavg().map((x) => Math.round(x * 100) / 100),
  };
}

function versionOf(pkg: string): string {
  try {
    return (require(`${pkg}/package.json`) as { version: string }).version;
  } catch {
    return 'not installed';
  }
}

export function versions(): Record<string, string> {
  return {
    node: process.versions.node,
    v8: process.versions.v8,
    '@embedstack/core': versionOf('@embedstack/core'),
    '@embedstack/cpu-backend': versionOf('@embedstack/cpu-backend'),
    '@tensorflow/tfjs-core': versionOf('@tensorflow/tfjs-core'),
    '@tensorflow/tfjs-backend-wasm': versionOf('@tensorflow/tfjs-backend-wasm'),
  };
}
