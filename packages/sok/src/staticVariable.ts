import {
  checkName,
  checkOptions,
  fnv1a32,
  type InitializerSpec,
  InvalidTypeError,
  invalidParameter,
  type OptimizerSpec,
  type TableOptions,
} from '@embedstack/core';
import { type InitializerName, resolveSokInitializer } from './initializer.js';
import { checkMode } from './mode.js';
import { defaultName, SokVariable, staticDeviceInitializer, takeDefaultName, type VariableMode } from './variable.js';

/** `new sok.Variable(options)`. Defaults in brackets. */
export interface VariableOptions {
  /** [rows, dimension], integers >= 1. Required. */
  shape: readonly [number, number] | number[];
  /** DynamicVariable's initializer strings, or a core initializer (fromArray / fromFunction take the whole table) ['random']. */
  initializer?: InitializerName | InitializerSpec;
  /** 'distributed': global row i on device i mod N at local row floor(i / N); 'localized:k': every row on device k ['distributed']. */
  mode?: VariableMode;
  /** Prefix of the dump files and stream of the random initializer [unique per process: 'Variable', 'Variable_1', ...]. */
  name?: string;
}

/**
 * SOK's static model-parallel Variable: `rows` rows of `dimension` floats, ids are
 * global row indices in [0, rows) (anything else is OUT_OF_RANGE), split over the
 * devices round-robin (one core static table per device).
 *
 * @throws FailedPreconditionError before sok.init; InvalidArgumentError / InvalidTypeError naming the option
 */
export class Variable extends SokVariable {
  /** Global rows (shape[0]). */
  readonly rows: number;
  /** The resolved initializer of the rows. */
  readonly initializer: InitializerSpec;
  /** Value type: always 'float32'. */
  readonly dtype = 'float32' as const;

  constructor(options: VariableOptions) {
    const o = checkOptions<VariableOptions>(options, ['shape', 'initializer', 'mode', 'name'], 'options', { required: true, expected: 'Variable options ({ shape: [rows, dim], ... })' });
    const shape = o.shape;
    if (!Array.isArray(shape) || shape.length !== 2) throw invalidParameter('shape', 'a [rows, dimension] pair', shape, InvalidTypeError);
    const [rows, dim] = shape as [unknown, unknown];
    if (typeof rows !== 'number' || !Number.isSafeInteger(rows) || rows < 1 || rows > 2 ** 31 - 1) throw invalidParameter('shape[0]', 'an integer in [1, 2^31)', rows);
    if (typeof dim !== 'number' || !Number.isSafeInteger(dim) || dim < 1 || dim > 1 << 20) throw invalidParameter('shape[1]', 'an integer in [1, 2^20]', dim);
    const initializer = resolveSokInitializer(o.initializer, dim);
    const mode = checkMode(o.mode);
    const name = checkName(o.name, 'name', defaultName('Variable'));
    super(name, dim, rows <= 2 ** 31 - 1 ? 'int32' : 'int64', mode);
    this.rows = rows;
    this.initializer = initializer;
    this.#inits = new Map();
    this.createShards();
    if (o.name === undefined || o.name === null) takeDefaultName('Variable');
  }

  #inits: Map<number, TableOptions['initializer']>;

  /** Always 'static'. */
  get kind(): 'static' {
    return 'static';
  }

  /** @internal The global rows (`rows`). */
  get staticRows(): number {
    return this.rows;
  }

  /** `[rows, dimension]`. */
  get shape(): [number, number] {
    return [this.rows, this.dimension];
  }

  /** @internal rows held by device `device` */
  deviceRows(device: number): number {
    if (this.mode !== 'distributed') return this.rows;
    const n = this.ctx.numDevices;
    return Math.max(0, Math.ceil((this.rows - device) / n));
  }

  protected tableOptions(device: number, optimizer: OptimizerSpec | undefined): TableOptions {
    const n = this.mode === 'distributed' ? this.ctx.numDevices : 1;
    let init = this.#inits.get(device);
    if (init === undefined && this.deviceRows(device) > 0) {
      init = staticDeviceInitializer(this.initializer, this.name, this.rows, this.dimension, device, n);
      this.#inits.set(device, init);
    }
    return {
      kind: 'static',
      dim: this.dimension,
      name: this.name,
      keyDtype: 'int32',
      vocabularySize: this.deviceRows(device),
      initializer: init,
      optimizer,
      stream: fnv1a32(this.name),
    };
  }
}
