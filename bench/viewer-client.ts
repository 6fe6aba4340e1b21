/**
 * The viewer side of the streaming benchmarks, run as its own process (`node --import tsx`) and
 * driven over IPC by procs.ts. It holds the SSE connections as raw node:net sockets and counts
 * complete frames per connection by counting the blank lines that end them (`\n\n`, carried
 * across reads; a chunked body's size lines taken out), without parsing the frames. The k-th
 * frame of a connection is the server's first frame when k = 1 (`retry:`, or nchan's `: hi`) and
 * the entry of seq k - 1 after that, so a frame's arrival time is matched to the append that
 * produced it with no parsing either. It is also the producer: appends go from here,
 * so send, acknowledgement and arrival times are read from one clock.
 */
import http from 'node:http';
import net from 'node:net';

export type ClientCommand =
  | {
      op: 'open';
      port: number;
      /** Each path is opened `perPath` times. */
      paths: string[];
      perPath: number;
      parallel: number;
      timeoutMs: number;
      /** Tries a viewer again, up to this many times, when its open is answered 5xx. */
      retries?: number;
    }
  | {
      op: 'fanout';
      appendUrl: string;
      /** Publish to a peer server at appendUrl instead of Tailwater's append API. */
      peer?: PeerPublish;
      entries: number;
      batch: number;
      pad: number;
      timeoutMs: number;
      /** Sent as the `Authorization` header of every append (`Bearer <token>`), if given. */
      authorization?: string;
      /**
       * At most this many entries published that some viewer does not hold yet: for a server that
       * drops what it cannot queue for a connection (Pushpin, 100 items per connection).
       */
      ahead?: number;
      /** Each entry its own append request (all of a batch at once), as nchan is fed. */
      oneEach?: boolean;
    }
  | {
      op: 'latency';
      appendUrl: string;
      peer?: PeerPublish;
      /** Appends per second, one entry per request, sent open-loop on a fixed schedule. */
      rate: number;
      /** Appends at the start left out of the figures. */
      warmup: number;
      measured: number;
      pad: number;
      maxInFlight: number;
      timeoutMs: number;
      /**
       * One more viewer opened when append `atIndex` is sent, while the others are live: its
       * times to first frame and to holding everything, and the live viewers' latency and
       * arrival gaps before and around it (JoinReport).
       */
      join?: { port: number; path: string; atIndex: number };
    }
  | {
      /**
       * Pushpin subscribes a viewer some time after its first frame: publishes comment frames to
       * the channel until every viewer has one, then counts every viewer from its first frame
       * again, so frame k is seq k - 1 from here as from the start.
       */
      op: 'settle';
      appendUrl: string;
      channel: string;
      timeoutMs: number;
    }
  | { op: 'close' };

/**
 * How entries are published to a peer (bench/peer-nchan.ts, bench/peer-pushpin.ts): nchan takes
 * one message per `POST` and frames it itself (`id:`, `event:`, `data:`); Pushpin's publish API
 * takes a batch of items, each frame written out whole in its `http-stream` format.
 */
export type PeerPublish = { to: 'nchan' } | { to: 'pushpin'; channel: string };

export interface SettledReply {
  op: 'settled';
  probes: number;
  /** Viewers that had their first frame but no probe within 5 s, closed and opened again. */
  reopened: number;
}

export interface OpenedReply {
  op: 'opened';
  ok: number;
  failed: number;
  firstFailure?: string;
  /** Opens answered 5xx and tried again (`retries`), and the first such answer. */
  retried: number;
  firstRetried?: string;
  ms: number;
}

export interface FanoutReply {
  op: 'fanout';
  /** First append sent → last viewer holding every entry. */
  ms: number;
  /** First append sent → last append acknowledged. */
  appendMs: number;
  viewers: number;
  complete: number;
  /** Frames a complete viewer holds (1 + last seq), and the fewest any viewer held. */
  frames: number;
  fewestFrames: number;
  /** Bytes a viewer received per entry, framing included. */
  bytesPerEntry: number;
}

export interface Percentiles {
  p50: number;
  p99: number;
  max: number;
}

export interface LatencyReply {
  op: 'latency';
  viewers: number;
  appends: number;
  failedAppends: number;
  firstFailure?: string;
  sendRate: number;
  samples: number;
  missing: number;
  /** Viewers whose frame count did not match the last seq (the frame ↔ seq match failed). */
  mismatched: number;
  fromSend: Percentiles;
  fromAck: Percentiles;
  /** Per entry: its last viewer's arrival minus its first viewer's. */
  spread: Percentiles;
  ack: Percentiles;
  bytesPerEntry: number;
  join?: JoinReport;
}

/** A viewer that joined during a latency run, and what the live viewers saw meanwhile. */
export interface JoinReport {
  /** Why it did not catch up (the times it did not reach are NaN). */
  failure?: string | undefined;
  /** From its connect to: its `retry:` frame, its first entry, holding `caughtUpSeq`. */
  firstFrameMs: number;
  firstEntryMs: number;
  caughtUpMs: number;
  /** The newest seq acknowledged when it joined: holding it, it has caught up. */
  caughtUpSeq: number;
  /** Live viewers, sent → received, for entries sent before the join and in the join window. */
  before: Percentiles;
  during: Percentiles;
  beforeEntries: number;
  duringEntries: number;
  /** The join window: from the join to when it had caught up, at least 1 s (or its wait). */
  windowMs: number;
  /**
   * The longest time any live viewer went between two consecutive entries' arrivals, before
   * and in the window (the schedule alone spaces them 1000 / rate ms apart).
   */
  gapBefore: number;
  gapDuring: number;
}

export type ClientReply =
  | OpenedReply
  | FanoutReply
  | LatencyReply
  | SettledReply
  | { op: 'closed' }
  | { op: 'error'; message: string };

interface Viewer {
  socket: net.Socket;
  port: number;
  path: string;
  status: number;
  frames: number;
  bytes: number;
  endsWithNewline: boolean;
  /** The response head as read so far; undefined once it has ended. */
  head: string | undefined;
  chunked: boolean;
  /** Chunked bodies: data bytes left in the current chunk, and a size line read in part. */
  chunkLeft: number;
  sizeLine: string;
  done: boolean;
  /** Arrival time of frame k at [k], while a latency run records them. */
  times: Float64Array | undefined;
  onChange: (() => void) | undefined;
}

const BLANK_LINE = Buffer.from('\n\n');
const viewers: Viewer[] = [];
/** Frames every viewer must reach (1 + last seq) before the current run is complete. */
let target = Infinity;
let doneCount = 0;
let doneAt = 0;
let onAllDone: (() => void) | undefined;

function onChunk(viewer: Viewer, chunk: Buffer): void {
  const now = performance.now();
  viewer.bytes += chunk.length;
  let body = chunk;
  if (viewer.head !== undefined) {
    // The response head, until its blank line: its status, and whether the body is chunked.
    viewer.head += chunk.toString('latin1');
    const end = viewer.head.indexOf('\r\n\r\n');
    if (end === -1) return;
    viewer.status = Number(viewer.head.slice(9, 12));
    viewer.chunked = /^transfer-encoding:\s*chunked/im.test(viewer.head.slice(0, end));
    body = chunk.subarray(chunk.length - (viewer.head.length - end - 4));
    viewer.head = undefined;
    if (viewer.status !== 200) {
      viewer.onChange?.();
      return;
    }
  }
  if (viewer.chunked) dechunk(viewer, body, now);
  else countFrames(viewer, body, now);
  viewer.onChange?.();
  if (!viewer.done && viewer.frames >= target) markDone(viewer, now);
}

/**
 * Counts the frames in the data of a chunked body (Pushpin's): chunks are cut wherever its
 * buffer filled, so a frame's blank line may be split by a chunk's size line.
 */
function dechunk(viewer: Viewer, body: Buffer, now: number): void {
  let at = 0;
  while (at < body.length) {
    if (viewer.chunkLeft > 0) {
      const end = Math.min(body.length, at + viewer.chunkLeft);
      countFrames(viewer, body.subarray(at, end), now);
      viewer.chunkLeft -= end - at;
      at = end;
      continue;
    }
    // Between chunks: the CRLF that ends a chunk's data, then the next one's size line.
    const lineEnd = body.indexOf(10, at);
    const piece = body.toString('latin1', at, lineEnd === -1 ? body.length : lineEnd);
    viewer.sizeLine += piece;
    if (lineEnd === -1) return;
    at = lineEnd + 1;
    const size = viewer.sizeLine.trim();
    viewer.sizeLine = '';
    if (size !== '') viewer.chunkLeft = parseInt(size, 16);
  }
}

/** Counts the blank lines that end frames, carrying a line feed across reads. */
function countFrames(viewer: Viewer, data: Buffer, now: number): void {
  if (data.length === 0) return;
  let from = 0;
  if (viewer.endsWithNewline && data[0] === 10) {
    viewer.frames += 1;
    if (viewer.times) viewer.times[viewer.frames] = now;
    from = 1;
  }
  for (let i = data.indexOf(BLANK_LINE, from); i !== -1; i = data.indexOf(BLANK_LINE, i + 2)) {
    viewer.frames += 1;
    if (viewer.times) viewer.times[viewer.frames] = now;
  }
  viewer.endsWithNewline = data[data.length - 1] === 10;
}

function markDone(viewer: Viewer, now: number): void {
  viewer.done = true;
  doneCount += 1;
  if (doneCount === viewers.length) {
    doneAt = now;
    onAllDone?.();
  }
}

/** Every viewer reaches `frames`; resolves true, or false at the deadline. */
function awaitAll(frames: number, deadline: number): Promise<boolean> {
  target = frames;
  const now = performance.now();
  for (const viewer of viewers) {
    if (!viewer.done && viewer.frames >= target) markDone(viewer, now);
  }
  if (doneCount === viewers.length) return Promise.resolve(true);
  return new Promise((resolve) => {
    const timer = setTimeout(
      () => {
        onAllDone = undefined;
        resolve(false);
      },
      Math.max(0, deadline - performance.now()),
    );
    onAllDone = () => {
      clearTimeout(timer);
      onAllDone = undefined;
      resolve(true);
    };
  });
}

function resetRun(): void {
  target = Infinity;
  doneCount = 0;
  doneAt = 0;
  for (const viewer of viewers) viewer.done = false;
}

/**
 * One read buffer shared by every socket: `onread` hands each read to `onChunk` synchronously,
 * without allocating a Buffer or going through the stream machinery per read.
 */
const READ_BUFFER = Buffer.alloc(256 * 1024);

/**
 * Opens one viewer; resolves once its first frame (`retry:`) arrived with status 200. One not
 * `counted` (a joiner) never counts towards a run being complete.
 */
function openViewer(
  port: number,
  path: string,
  timeoutMs: number,
  counted = true,
): Promise<Viewer> {
  return new Promise((resolve, reject) => {
    const viewer: Viewer = {
      socket: undefined as unknown as net.Socket,
      port,
      path,
      status: 0,
      frames: 0,
      bytes: 0,
      endsWithNewline: false,
      head: '',
      chunked: false,
      chunkLeft: 0,
      sizeLine: '',
      done: !counted,
      times: undefined,
      onChange: undefined,
    };
    const socket = net.connect({
      host: '127.0.0.1',
      port,
      onread: {
        buffer: READ_BUFFER,
        callback: (bytes: number, buffer: Uint8Array) => {
          onChunk(viewer, Buffer.from(buffer.buffer, buffer.byteOffset, bytes));
          return true;
        },
      },
    });
    viewer.socket = socket;
    socket.setNoDelay(true);
    const fail = (message: string) => {
      clearTimeout(timer);
      viewer.onChange = undefined;
      socket.destroy();
      reject(new Error(message));
    };
    const timer = setTimeout(() => fail(`no first frame within ${timeoutMs} ms`), timeoutMs);
    viewer.onChange = () => {
      if (viewer.status !== 200) {
        fail(`status ${viewer.status}`);
      } else if (viewer.frames >= 1) {
        clearTimeout(timer);
        viewer.onChange = undefined;
        resolve(viewer);
      }
    };
    socket.on('connect', () => {
      socket.write(
        `GET ${path} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nAccept: text/event-stream\r\n\r\n`,
      );
    });
    socket.on('error', (error) => fail(error.message));
    socket.on('close', () => {
      if (viewer.onChange) fail('closed before the first frame');
    });
  });
}

/** How long a joiner is given to catch up before the run reports it as not caught up. */
const JOIN_WAIT_MS = 20_000;

interface Joiner {
  startedAt: number;
  firstFrameAt: number;
  firstEntryAt: number;
  caughtUpAt: number;
  caughtUpSeq: number;
  viewer: Viewer | undefined;
  failure: string | undefined;
}

/**
 * Opens a viewer that is not one of `viewers` (the fan-out and latency counts leave it out) and
 * records when it got its first frame, its first entry (frame 2) and entry `caughtUpSeq`.
 */
function join(port: number, path: string, caughtUpSeq: number): Joiner {
  const joiner: Joiner = {
    startedAt: performance.now(),
    firstFrameAt: 0,
    firstEntryAt: 0,
    caughtUpAt: 0,
    caughtUpSeq,
    viewer: undefined,
    failure: undefined,
  };
  const watch = (viewer: Viewer) => {
    const now = performance.now();
    if (joiner.firstEntryAt === 0 && viewer.frames >= 2) joiner.firstEntryAt = now;
    if (viewer.frames >= caughtUpSeq + 1) {
      joiner.caughtUpAt = now;
      viewer.onChange = undefined;
    }
  };
  openViewer(port, path, JOIN_WAIT_MS, false).then(
    (viewer) => {
      joiner.firstFrameAt = performance.now();
      joiner.viewer = viewer;
      viewer.onChange = () => watch(viewer);
      watch(viewer);
    },
    (error: unknown) => {
      joiner.failure = error instanceof Error ? error.message : String(error);
    },
  );
  return joiner;
}

async function open(command: Extract<ClientCommand, { op: 'open' }>): Promise<OpenedReply> {
  const started = performance.now();
  const jobs: string[] = [];
  for (const path of command.paths) for (let i = 0; i < command.perPath; i += 1) jobs.push(path);
  let next = 0;
  let ok = 0;
  let failed = 0;
  let firstFailure: string | undefined;
  let retried = 0;
  let firstRetried: string | undefined;
  const worker = async () => {
    while (next < jobs.length && performance.now() - started < command.timeoutMs) {
      const path = jobs[next]!;
      next += 1;
      for (let attempt = 0; ; attempt += 1) {
        try {
          viewers.push(await openViewer(command.port, path, 10_000));
          ok += 1;
        } catch (error) {
          const message = error instanceof Error ? error.message : String(error);
          if (/^status 5/.test(message) && attempt < (command.retries ?? 0)) {
            retried += 1;
            firstRetried ??= message;
            continue;
          }
          failed += 1;
          firstFailure ??= message;
        }
        break;
      }
    }
  };
  await Promise.all(Array.from({ length: command.parallel }, worker));
  failed += jobs.length - ok - failed; // never started: out of time
  const ms = performance.now() - started;
  return { op: 'opened', ok, failed, firstFailure, retried, firstRetried, ms };
}

const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });

interface Ack {
  first: number;
  last: number;
  seqs: number[];
}

/** A POST on the producer's keep-alive connections; resolves with a 2xx answer's body. */
function request(url: string, body: string, authorization?: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      url,
      {
        method: 'POST',
        agent,
        headers: {
          'content-type': 'application/json',
          'content-length': Buffer.byteLength(body),
          ...(authorization === undefined ? {} : { authorization }),
        },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          const status = res.statusCode ?? 0;
          if (status < 200 || status > 299) reject(new Error(`append: ${status} ${text}`));
          else resolve(text);
        });
        res.on('error', reject);
      },
    );
    req.setTimeout(10_000, () => req.destroy(new Error('append timed out')));
    req.on('error', reject);
    req.end(body);
  });
}

interface Entry {
  kind: string;
  data: unknown;
}

/**
 * Entries published to a peer since this process started: a peer's frames carry ids of its own,
 * so the producer numbers its entries as it sends them, from 1, like Tailwater's seqs.
 */
let peerSeq = 0;

/**
 * Publishes one batch; the answer gives the seqs the entries have (frame k is seq k - 1). With
 * `oneEach`, and always to nchan (one message per request), each entry is its own request, all
 * sent at once on up to the agent's 64 connections.
 */
async function append(command: Publishing, entries: Entry[]): Promise<Ack> {
  if (!command.oneEach && command.peer?.to !== 'nchan') return publish(command, entries);
  const acks = await Promise.all(entries.map((entry) => publish(command, [entry])));
  return {
    first: Math.min(...acks.map((ack) => ack.first)),
    last: Math.max(...acks.map((ack) => ack.last)),
    seqs: acks.flatMap((ack) => ack.seqs),
  };
}

interface Publishing {
  appendUrl: string;
  peer?: PeerPublish;
  authorization?: string;
  oneEach?: boolean;
}

/** One request: Tailwater's append, one nchan message, or a batch of Pushpin items. */
async function publish(command: Publishing, entries: Entry[]): Promise<Ack> {
  const { appendUrl, peer } = command;
  if (!peer) {
    const body = JSON.stringify({ events: entries });
    return JSON.parse(await request(appendUrl, body, command.authorization)) as Ack;
  }
  // Numbered before anything is awaited, so in the order they are sent.
  const first = peerSeq + 1;
  peerSeq += entries.length;
  const seqs = entries.map((_, i) => first + i);
  // The same data line as Tailwater's native frame: {"seq","time","kind","data"}.
  const data = (entry: Entry, seq: number) =>
    JSON.stringify({ seq, time: new Date().toISOString(), kind: entry.kind, data: entry.data });
  if (peer.to === 'pushpin') {
    const items = entries.map((entry, i) => ({
      channel: peer.channel,
      formats: {
        'http-stream': {
          content: `id: ${seqs[i]}\nevent: ${entry.kind}\ndata: ${data(entry, seqs[i]!)}\n\n`,
        },
      },
    }));
    await request(appendUrl, JSON.stringify({ items }));
  } else {
    await request(appendUrl, data(entries[0]!, first));
  }
  return { first, last: seqs.at(-1)!, seqs };
}

async function fanout(command: Extract<ClientCommand, { op: 'fanout' }>): Promise<FanoutReply> {
  resetRun();
  const deadline = performance.now() + command.timeoutMs;
  const pad = 'x'.repeat(command.pad);
  const bytesBefore = viewers[0]?.bytes ?? 0;
  const started = performance.now();
  let last = 0;
  for (let sent = 0; sent < command.entries; sent += command.batch) {
    if (performance.now() > deadline) throw new Error('fanout: appends ran out of time');
    const events: Entry[] = [];
    for (let j = sent; j < Math.min(command.entries, sent + command.batch); j += 1) {
      events.push({ kind: 'progress', data: { n: j, pad } });
    }
    if (command.ahead !== undefined && last > 0) {
      // Every viewer must hold all but `ahead - events.length` of what was published.
      const needed = last + events.length - command.ahead + 1;
      if (!(await awaitAll(needed, deadline))) {
        const fewest = Math.min(...viewers.map((viewer) => viewer.frames));
        throw new Error(
          `fanout: a viewer held ${fewest} frames where ${needed} were due (entries lost?), ${sent} of ${command.entries} published`,
        );
      }
      resetRun();
    }
    last = (await append(command, events)).last;
  }
  const appendMs = performance.now() - started;
  const complete = await awaitAll(last + 1, deadline);
  const reply: FanoutReply = {
    op: 'fanout',
    ms: (complete ? doneAt : performance.now()) - started,
    appendMs,
    viewers: viewers.length,
    complete: doneCount,
    frames: last + 1,
    fewestFrames: Math.min(...viewers.map((viewer) => viewer.frames)),
    bytesPerEntry: ((viewers[0]?.bytes ?? 0) - bytesBefore) / command.entries,
  };
  resetRun();
  return reply;
}

function percentiles(values: Float64Array): Percentiles {
  if (values.length === 0) return { p50: NaN, p99: NaN, max: NaN };
  values.sort();
  const at = (q: number) => values[Math.min(values.length - 1, Math.floor(q * values.length))]!;
  return { p50: at(0.5), p99: at(0.99), max: values[values.length - 1]! };
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

async function latency(command: Extract<ClientCommand, { op: 'latency' }>): Promise<LatencyReply> {
  resetRun();
  const deadline = performance.now() + command.timeoutMs;
  const total = command.warmup + command.measured;
  const sendAt = new Float64Array(total);
  const ackAt = new Float64Array(total);
  const seqOf = new Int32Array(total);
  const slots = Math.max(...viewers.map((v) => v.frames)) + total + 16;
  for (const viewer of viewers) viewer.times = new Float64Array(slots);
  const pad = 'x'.repeat(command.pad);
  const bytesBefore = viewers[0]?.bytes ?? 0;
  let inFlight = 0;
  let failedAppends = 0;
  let firstFailure: string | undefined;
  let lastSeq = 0;
  const interval = 1000 / command.rate;
  const started = performance.now() + 10;
  let sent = 0;
  let joiner: Joiner | undefined;
  let joinAt = Infinity;
  for (let i = 0; i < total && performance.now() < deadline; i += 1) {
    const wait = started + i * interval - performance.now();
    if (wait >= 1) await sleep(Math.floor(wait));
    while (inFlight >= command.maxInFlight && performance.now() < deadline) await sleep(1);
    if (command.join && i === command.join.atIndex) {
      joiner = join(command.join.port, command.join.path, lastSeq);
      joinAt = joiner.startedAt;
    }
    const now = performance.now();
    const entry = { kind: 'progress', data: { t: performance.timeOrigin + now, i, pad } };
    sendAt[i] = now;
    inFlight += 1;
    sent += 1;
    append(command, [entry]).then(
      (ack) => {
        ackAt[i] = performance.now();
        seqOf[i] = ack.seqs[0]!;
        lastSeq = Math.max(lastSeq, ack.last);
        inFlight -= 1;
      },
      (error: unknown) => {
        failedAppends += 1;
        firstFailure ??= error instanceof Error ? error.message : String(error);
        inFlight -= 1;
      },
    );
  }
  const sendRate = (sent * 1000) / (performance.now() - started);
  while (inFlight > 0 && performance.now() < deadline) await sleep(5);
  await awaitAll(lastSeq + 1, deadline);
  // The joiner gets JOIN_WAIT_MS from when it came, however long the run is.
  while (
    joiner &&
    joiner.caughtUpAt === 0 &&
    !joiner.failure &&
    performance.now() < Math.min(deadline, joinAt + JOIN_WAIT_MS)
  ) {
    await sleep(5);
  }

  let mismatched = 0;
  for (const viewer of viewers) if (viewer.frames !== lastSeq + 1) mismatched += 1;
  const measuredSeqs: Array<{ i: number; seq: number }> = [];
  for (let i = command.warmup; i < total; i += 1) {
    if (seqOf[i]! > 0) measuredSeqs.push({ i, seq: seqOf[i]! });
  }
  const fromSend = new Float64Array(measuredSeqs.length * viewers.length);
  const fromAck = new Float64Array(measuredSeqs.length * viewers.length);
  const spread = new Float64Array(measuredSeqs.length);
  let samples = 0;
  let missing = 0;
  measuredSeqs.forEach(({ i, seq }, k) => {
    let first = Infinity;
    let last = -Infinity;
    for (const viewer of viewers) {
      const arrived = viewer.times![seq + 1] ?? 0;
      if (arrived === 0) {
        missing += 1;
        continue;
      }
      fromSend[samples] = arrived - sendAt[i]!;
      fromAck[samples] = arrived - ackAt[i]!;
      samples += 1;
      first = Math.min(first, arrived);
      last = Math.max(last, arrived);
    }
    spread[k] = last - first;
  });
  const acks = new Float64Array(measuredSeqs.map(({ i }) => ackAt[i]! - sendAt[i]!));
  const joinReport = joiner && joinStats(joiner, joinAt, measuredSeqs, sendAt);
  const reply: LatencyReply = {
    op: 'latency',
    viewers: viewers.length,
    appends: sent,
    failedAppends,
    firstFailure,
    sendRate,
    samples,
    missing,
    mismatched,
    fromSend: percentiles(fromSend.subarray(0, samples)),
    fromAck: percentiles(fromAck.subarray(0, samples)),
    spread: percentiles(spread),
    ack: percentiles(acks),
    bytesPerEntry: ((viewers[0]?.bytes ?? 0) - bytesBefore) / Math.max(1, sent),
    join: joinReport,
  };
  for (const viewer of viewers) viewer.times = undefined;
  joiner?.viewer?.socket.destroy();
  resetRun();
  return reply;
}

/**
 * Splits the live viewers' deliveries at the join: latency (sent → received) and the longest
 * gap between consecutive arrivals at one viewer, for entries sent before the join and for
 * those sent in the window from it until the joiner had caught up (at least 1 s).
 */
function joinStats(
  joiner: Joiner,
  joinAt: number,
  measured: ReadonlyArray<{ i: number; seq: number }>,
  sendAt: Float64Array,
): JoinReport {
  const failure =
    joiner.failure ??
    (joiner.caughtUpAt === 0 ? `not caught up within ${JOIN_WAIT_MS} ms` : undefined);
  // A joiner that never caught up is a finding, not an error: the window is then its wait.
  const windowEnd = failure ? joinAt + JOIN_WAIT_MS : Math.max(joiner.caughtUpAt, joinAt + 1000);
  const since = (at: number) => (at === 0 ? NaN : at - joiner.startedAt);
  const ordered = [...measured].sort((a, b) => a.seq - b.seq);
  const windowOf = (i: number) =>
    sendAt[i]! < joinAt ? 'before' : sendAt[i]! <= windowEnd ? 'during' : undefined;
  const latencies = { before: [] as number[], during: [] as number[] };
  const gaps = { before: 0, during: 0 };
  for (const viewer of viewers) {
    let previous = 0;
    for (const { i, seq } of ordered) {
      const arrived = viewer.times![seq + 1] ?? 0;
      const window = windowOf(i);
      if (arrived > 0 && window) {
        latencies[window].push(arrived - sendAt[i]!);
        if (previous > 0) gaps[window] = Math.max(gaps[window], arrived - previous);
      }
      previous = arrived;
    }
  }
  const entries = (window: 'before' | 'during') =>
    ordered.filter(({ i }) => windowOf(i) === window).length;
  return {
    failure,
    firstFrameMs: since(joiner.firstFrameAt),
    firstEntryMs: since(joiner.firstEntryAt),
    caughtUpMs: since(joiner.caughtUpAt),
    caughtUpSeq: joiner.caughtUpSeq,
    before: percentiles(Float64Array.from(latencies.before)),
    during: percentiles(Float64Array.from(latencies.during)),
    beforeEntries: entries('before'),
    duringEntries: entries('during'),
    windowMs: windowEnd - joinAt,
    gapBefore: gaps.before,
    gapDuring: gaps.during,
  };
}

/** How long a Pushpin viewer may go without a probe before it is taken as never subscribed. */
const SUBSCRIBE_WAIT_MS = 5000;

async function settle(command: Extract<ClientCommand, { op: 'settle' }>): Promise<ClientReply> {
  const deadline = performance.now() + command.timeoutMs;
  const content = ': settling\n\n';
  const body = JSON.stringify({
    items: [{ channel: command.channel, formats: { 'http-stream': { content } } }],
  });
  let probes = 0;
  let reopened = 0;
  let since = performance.now();
  const waiting = () => viewers.filter((viewer) => viewer.frames < 2);
  while (waiting().length > 0) {
    if (performance.now() > deadline) {
      throw new Error(`settle: ${waiting().length} viewers had no probe after ${probes} probes`);
    }
    if (performance.now() - since > SUBSCRIBE_WAIT_MS) {
      // Opened, first frame and all, but never subscribed: what a browser would see as a
      // stream that stays silent. Counted, and opened again.
      for (const viewer of waiting()) {
        viewer.socket.destroy();
        viewers[viewers.indexOf(viewer)] = await openViewer(viewer.port, viewer.path, 10_000);
        reopened += 1;
      }
      since = performance.now();
    }
    await request(command.appendUrl, body);
    probes += 1;
    await sleep(100);
  }
  // The last probes may still be on their way to some viewers.
  await sleep(500);
  for (const viewer of viewers) viewer.frames = 1;
  return { op: 'settled', probes, reopened };
}

function close(): void {
  for (const viewer of viewers.splice(0)) viewer.socket.destroy();
  agent.destroy();
}

async function handle(command: ClientCommand): Promise<ClientReply> {
  switch (command.op) {
    case 'open':
      return open(command);
    case 'fanout':
      return fanout(command);
    case 'latency':
      return latency(command);
    case 'settle':
      return settle(command);
    case 'close':
      close();
      return { op: 'closed' };
  }
}

process.on('message', (command: ClientCommand) => {
  handle(command).then(
    (reply) => process.send!(reply),
    (error: unknown) =>
      process.send!({ op: 'error', message: error instanceof Error ? error.message : `${error}` }),
  );
});
process.on('disconnect', () => {
  close();
  process.exit(0);
});
process.stdout.write('viewer client ready\n');
