export { runCommand, EXIT_CANCELLED, EXIT_TIMEOUT } from './runner.js';
export type { RunCommandOptions } from './runner.js';
