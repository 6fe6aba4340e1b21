/** The run's latest `progress` event. */
export interface Progress {
  pct: number;
  step?: string | undefined;
}

/** `data.pct` of a progress event, if it is a usable percentage. */
export function progressOf(data: unknown, step: string | undefined): Progress | null {
  const pct = (data as { pct?: unknown } | null | undefined)?.pct;
  if (typeof pct !== 'number' || !Number.isFinite(pct)) return null;
  return { pct: Math.max(0, Math.min(100, pct)), step };
}

export function ProgressBar({ progress }: { progress: Progress }) {
  const rounded = Math.round(progress.pct);
  const label = `${rounded}%${progress.step ? ` (${progress.step})` : ''}`;
  return (
    <div className="progress">
      <div
        className="progress-track"
        role="progressbar"
        aria-label="Run progress"
        aria-valuemin={0}
        aria-valuemax={100}
        aria-valuenow={rounded}
        aria-valuetext={label}
      >
        <div className="progress-fill" style={{ width: `${progress.pct}%` }} />
      </div>
      <span className="progress-label">{label}</span>
    </div>
  );
}
