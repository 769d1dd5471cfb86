// Checkpoints (docs/checkpoint-format.md) and the HugeCTR sparse model layout.
export { crc32c } from './crc32c.js';
export { CHECKPOINT_FORMAT, CHECKPOINT_FORMAT_VERSION } from './manifest.js';
export type { TableManifest, CheckpointFileInfo, CheckpointSlot, CheckpointDtype, ManifestInitializer } from './manifest.js';
export { saveTable } from './save.js';
export type { SaveTableOptions } from './save.js';
export { loadTable, readTableManifest, readCheckpointBatches, verifyCheckpoint } from './load.js';
export type { LoadTableOptions, CheckpointBatch } from './load.js';
export { exportHugeCTR, importHugeCTR, readHugeCTRModel, inspectHugeCTRModel, HUGECTR_KEY_FILE, HUGECTR_VECTOR_FILE } from './hugectr.js';
export type {
  HugeCTRKeyFormat,
  HugeCTRReadOptions,
  HugeCTRModelInfo,
  HugeCTRBatch,
  ImportHugeCTROptions,
  ExportHugeCTROptions,
} from './hugectr.js';
