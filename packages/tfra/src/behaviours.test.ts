import { beforeAll } from 'vitest';
import * as de from './index.js';
import { describeBehaviours } from '../test/behaviours.js';
import { useTestBackend } from '../test/setup.js';

beforeAll(async () => {
  await useTestBackend();
});

describeBehaviours('CuckooHashTableCreator', () => new de.CuckooHashTableCreator());
describeBehaviours('HkvHashTableCreator', () => new de.HkvHashTableCreator({ initCapacity: 64, maxCapacity: 1 << 16 }));
