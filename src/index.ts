// The package's public surface: the model types and the building blocks of a server.
export * from './model/index.js';
export type { Store } from './store/store.js';
export { SqliteStore } from './store/sqlite.js';
export type { Bus } from './bus/bus.js';
export { MemoryBus } from './bus/memory.js';
export * from './engine/index.js';
export { buildApp } from './http/app.js';
export { startServer } from './cli/server.js';
export * from './client/index.js';
