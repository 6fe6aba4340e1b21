/**
 * The origin behind Pushpin in the streaming benchmarks (peer-pushpin.ts), run as its own
 * process: Pushpin forwards each viewer's request here once, and this answers with GRIP
 * instructions (`Grip-Hold: stream` on channel `<id>` for `GET /stream/<id>`) and the first frame
 * (`retry: 2000`), as Tailwater and the bare writer send. Pushpin then holds the connection and
 * writes to it whatever is published to the channel; this process takes no part in that.
 *
 * Listens on GRIP_ORIGIN_PORT on loopback and prints `grip origin listening` once it does.
 */
import http from 'node:http';

const FIRST_FRAME = 'retry: 2000\n\n';

const server = http.createServer((req, res) => {
  const match = /^\/stream\/(\w+)$/.exec(req.url ?? '');
  if (!match) {
    res.writeHead(404, { 'Content-Type': 'text/plain' }).end('not found\n');
    return;
  }
  res.writeHead(200, {
    'Content-Type': 'text/event-stream; charset=utf-8',
    'Cache-Control': 'no-cache',
    'Grip-Hold': 'stream',
    'Grip-Channel': match[1]!,
    'Content-Length': Buffer.byteLength(FIRST_FRAME),
  });
  res.end(FIRST_FRAME);
});
server.listen(Number(process.env['GRIP_ORIGIN_PORT']), '127.0.0.1', () => {
  process.stdout.write('grip origin listening\n');
});
process.on('SIGTERM', () => process.exit(0));
