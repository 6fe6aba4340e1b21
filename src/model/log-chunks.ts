/**
 * Cuts log text into pieces of at most `maxBytes` UTF-8 bytes, each ending after its last
 * newline when there is one, and never splitting a character (so every piece is valid UTF-8
 * and its byte offset is exact). Freight's rule, applied at the server.
 */
export function splitLogText(text: string, maxBytes: number): string[] {
  if (Buffer.byteLength(text, 'utf8') <= maxBytes) return [text];
  const bytes = Buffer.from(text, 'utf8');
  const pieces: string[] = [];
  let start = 0;
  while (bytes.length - start > maxBytes) {
    let end = bytes.lastIndexOf(0x0a, start + maxBytes - 1);
    if (end >= start) {
      end += 1;
    } else {
      end = start + maxBytes;
      // Step back over UTF-8 continuation bytes (10xxxxxx) to the start of a character; if the
      // limit is smaller than that one character, take the whole character anyway.
      while (end > start && (bytes[end]! & 0xc0) === 0x80) end -= 1;
      if (end === start) {
        end = start + 1;
        while (end < bytes.length && (bytes[end]! & 0xc0) === 0x80) end += 1;
      }
    }
    pieces.push(bytes.toString('utf8', start, end));
    start = end;
  }
  if (start < bytes.length) pieces.push(bytes.toString('utf8', start));
  return pieces;
}
