export * from './cursor.js';
export * from './entry.js';
export * from './errors.js';
export * from './names.js';
export * from './run.js';
export * from './settings.js';
export * from './stream-key.js';
export * from './log-chunks.js';
