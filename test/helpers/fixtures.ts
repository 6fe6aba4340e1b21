/**
 * The seed's iceberg-mutation-event.json (001), with its snapshotId cut to fit a JS number
 * exactly, for tests that compare parsed JSON. (test/e2e/stomp-source.test.ts uses the verbatim
 * text, whose snapshotId is above 2^53.)
 */
export const SEED_ICEBERG_EVENT = {
  eventId: 'a7c8f2b1-3e4d-4f1a-b8c9-2d0e1a5b6c7d',
  eventTimestamp: '2023-10-27T10:25:40.123Z',
  sourceApplication: 'spark-daily-etl-job-05',
  tableIdentifier: 'production.reporting.daily_user_activity',
  eventType: 'COMMIT_SUCCESS',
  payload: {
    operation: 'append',
    snapshotId: 8734628364872364,
    summary: {
      'added-data-files': '128',
      'added-records': '15782093',
      'total-records': '983456123',
      'changed-partition-count': '3',
    },
    manifestList: 's3://bucket/path/to/snap-8734628364872364-1-a9b8c7d6.avro',
    schemaChanged: false,
  },
};
