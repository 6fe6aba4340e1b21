import { readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { fileURLToPath } from 'node:url';

const FILE = fileURLToPath(new URL('../docs/BENCHMARKS.md', import.meta.url));

export interface Row {
  name: string;
  value: string;
  ratio?: string;
  note?: string;
}

/** Replaces (or adds) this benchmark's section of docs/BENCHMARKS.md. */
export function writeSection(id: string, title: string, intro: string, rows: Row[]): void {
  let doc: string;
  try {
    doc = readFileSync(FILE, 'utf8');
  } catch {
    doc =
      '# Benchmarks\n\nWritten by `npm run bench`; each section is replaced when its benchmark runs again. Ratios compare against a baseline measured in the same run, so they travel between machines better than the absolute figures.\n';
  }
  const machine = `${os.cpus().length} × ${os.cpus()[0]?.model.trim() ?? 'cpu'}, Node ${process.version}`;
  const table = [
    '| measurement | result | ratio to baseline | note |',
    '| --- | --- | --- | --- |',
    ...rows.map((r) => `| ${r.name} | ${r.value} | ${r.ratio ?? ''} | ${r.note ?? ''} |`),
  ].join('\n');
  const section = `<!-- bench:${id} -->\n## ${title}\n\n${intro}\n\nMeasured ${new Date().toISOString()} on ${machine}.\n\n${table}\n<!-- /bench:${id} -->`;
  const pattern = new RegExp(`<!-- bench:${id} -->[\\s\\S]*?<!-- /bench:${id} -->`);
  doc = pattern.test(doc) ? doc.replace(pattern, section) : `${doc.trimEnd()}\n\n${section}\n`;
  writeFileSync(FILE, doc);
}

export function perSecond(count: number, ms: number): number {
  return (count * 1000) / ms;
}

export function fmt(n: number): string {
  return n >= 100 ? Math.round(n).toLocaleString('en-US') : n.toFixed(2);
}

export function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1
    ? sorted[middle]!
    : ((sorted[middle - 1] ?? NaN) + (sorted[middle] ?? NaN)) / 2;
}
