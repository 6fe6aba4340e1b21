/**
 * The baseline for the streaming benchmarks: the least a Node server can do to fan SSE frames
 * out, with no store, engine or framework. Run as its own process (`node --import tsx`).
 *
 * - An SSE listener: any GET on it becomes a viewer, answered with SSE headers and
 *   `retry: 2000`. With BARE_SSE=net (the default) it is a node:net server that reads the
 *   request head and writes the response itself, no chunked encoding; with BARE_SSE=http it is
 *   a plain node:http server (`res.write` per frame, chunked like any node:http response), to
 *   tell what node:http itself costs.
 * - A node:http control listener: `POST /events` takes Tailwater's append body
 *   (`{"events":[{"kind","data"}…]}`), numbers the events from seq 1, builds each frame once in
 *   Tailwater's native format (`id: seq`, `event: kind`, `data: {"seq","time","kind","data"}`),
 *   writes them to every viewer, then answers `{"first","last","seqs"}` like Tailwater. With
 *   BARE_WRITE=frame (the default) each frame is its own write, corked per socket so a batch
 *   leaves in one writev; with BARE_WRITE=batch a batch is concatenated once and written to
 *   each socket as one buffer; with BARE_WRITE=coalesce the frames of every request that lands
 *   in one turn of the event loop are held until the next turn (setImmediate), concatenated
 *   once and written to each socket as one buffer, then those requests are answered: what
 *   Tailwater's reader does with appends that land together, with no store in between.
 *
 * Prints `bare sse=<port> control=<url>` once both listen.
 */
import http from 'node:http';
import net from 'node:net';

const MODE = process.env['BARE_SSE'] === 'http' ? 'http' : 'net';
const WRITE = process.env['BARE_WRITE'] ?? 'frame';
const BATCH = WRITE === 'batch';
const COALESCE = WRITE === 'coalesce';

const HEADERS = {
  'Content-Type': 'text/event-stream; charset=utf-8',
  'Cache-Control': 'no-cache, no-store, no-transform',
  'X-Accel-Buffering': 'no',
  Connection: 'keep-alive',
};
const RETRY = Buffer.from('retry: 2000\n\n');
const RESPONSE_HEAD = Buffer.concat([
  Buffer.from(
    `HTTP/1.1 200 OK\r\n${Object.entries(HEADERS)
      .map(([name, value]) => `${name}: ${value}\r\n`)
      .join('')}\r\n`,
  ),
  RETRY,
]);
const MAX_HEAD = 16 * 1024;

/** What a viewer is to the fan-out: a raw socket, or a node:http response. */
interface Viewer {
  write(chunk: Buffer): void;
  cork(): void;
  uncork(): void;
  destroy(): void;
}

const viewers = new Set<Viewer>();
let seq = 0;

const sseNet = net.createServer((socket) => {
  socket.setNoDelay(true);
  let head = '';
  let open = false;
  socket.on('data', (chunk: Buffer) => {
    if (open) return; // a viewer sends nothing after its request
    head += chunk.toString('latin1');
    if (head.includes('\r\n\r\n')) {
      open = true;
      head = '';
      socket.write(RESPONSE_HEAD);
      viewers.add(socket);
    } else if (head.length > MAX_HEAD) {
      socket.destroy();
    }
  });
  socket.on('close', () => viewers.delete(socket));
  socket.on('error', () => socket.destroy());
});

const sseHttp = http.createServer((req, res) => {
  res.writeHead(200, HEADERS);
  res.socket?.setNoDelay(true);
  res.write(RETRY);
  const viewer: Viewer = {
    write: (chunk) => void res.write(chunk),
    cork: () => res.cork(),
    uncork: () => res.uncork(),
    destroy: () => res.destroy(),
  };
  viewers.add(viewer);
  res.on('close', () => viewers.delete(viewer));
});

interface Body {
  events: Array<{ kind: string; data: unknown }>;
}

/** BARE_WRITE=coalesce: the frames and answers waiting for the next turn. */
let held: { frames: Buffer[]; answers: Array<() => void> } | undefined;

function flushHeld(): void {
  const { frames, answers } = held!;
  held = undefined;
  const batch = frames.length === 1 ? frames[0]! : Buffer.concat(frames);
  for (const viewer of viewers) viewer.write(batch);
  for (const answer of answers) answer();
}

function fanOut(body: Body, answer: (seqs: number[]) => void): void {
  const time = new Date().toISOString();
  const seqs: number[] = [];
  const frames: Buffer[] = [];
  for (const event of body.events) {
    seq += 1;
    seqs.push(seq);
    const entry = JSON.stringify({ seq, time, kind: event.kind, data: event.data });
    frames.push(Buffer.from(`id: ${seq}\nevent: ${event.kind}\ndata: ${entry}\n\n`));
  }
  if (COALESCE) {
    if (!held) {
      held = { frames: [], answers: [] };
      setImmediate(flushHeld);
    }
    held.frames.push(...frames);
    held.answers.push(() => answer(seqs));
    return;
  }
  if (BATCH) {
    const batch = frames.length === 1 ? frames[0]! : Buffer.concat(frames);
    for (const viewer of viewers) viewer.write(batch);
  } else {
    for (const viewer of viewers) {
      viewer.cork();
      for (const frame of frames) viewer.write(frame);
      viewer.uncork();
    }
  }
  answer(seqs);
}

const control = http.createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (chunk: Buffer) => chunks.push(chunk));
  req.on('end', () => {
    if (req.method !== 'POST' || req.url !== '/events') {
      res.writeHead(404).end();
      return;
    }
    fanOut(JSON.parse(Buffer.concat(chunks).toString('utf8')) as Body, (seqs) => {
      const answer = JSON.stringify({ first: seqs[0], last: seqs.at(-1), duplicates: 0, seqs });
      res.writeHead(200, { 'content-type': 'application/json' }).end(answer);
    });
  });
});

const sse = MODE === 'http' ? sseHttp : sseNet;
sse.listen(0, '127.0.0.1', () => {
  control.listen(0, '127.0.0.1', () => {
    const ssePort = (sse.address() as net.AddressInfo).port;
    const controlPort = (control.address() as net.AddressInfo).port;
    process.stdout.write(`bare sse=${ssePort} control=http://127.0.0.1:${controlPort}\n`);
  });
});

const stop = () => {
  for (const viewer of viewers) viewer.destroy();
  process.exit(0);
};
process.once('SIGTERM', stop);
process.once('SIGINT', stop);
