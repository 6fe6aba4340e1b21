/**
 * What OpenTelemetry ingest did since the server started, for /metrics: records stored, records
 * an exporter sent again and that were already stored (its retries), and records refused.
 */
export class OtlpStats {
  stored = 0;
  duplicates = 0;
  rejected = 0;
}
