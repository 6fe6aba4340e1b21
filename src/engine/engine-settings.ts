import type { Settings } from '../model/settings.js';

/** The settings the engine reads. */
export type EngineSettings = Pick<
  Settings,
  | 'heartbeatSeconds'
  | 'pollSeconds'
  | 'readBatchEntries'
  | 'maxBytesPerTick'
  | 'maxStreamBytes'
  | 'maxStreamSeconds'
  | 'maxIdleSeconds'
  | 'finishGraceSeconds'
  | 'unknownRunGraceSeconds'
  | 'runStatePollSeconds'
  | 'replayBufferBytes'
  | 'maxPendingBytesPerViewer'
  | 'maxActiveStreams'
  | 'maxActiveConnections'
  | 'maxSubscribersPerStream'
  | 'maxStreamsPerClient'
  | 'maxStreamsPerToken'
  | 'tailerIdleGraceSeconds'
  | 'maxEventBytes'
  | 'maxBatchEntries'
>;
