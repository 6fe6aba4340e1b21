import Anser from 'anser';
import type { CSSProperties, ReactNode } from 'react';
import { READABLE_FOREGROUND, textOn } from './ansi-palette.js';

/** A range of a line's plain text to highlight (a search match). */
export interface Mark {
  start: number;
  end: number;
  active: boolean;
}

function styleOf(part: Anser.AnserJsonEntry): CSSProperties {
  const style: CSSProperties = {};
  if (part.fg) style.color = `rgb(${READABLE_FOREGROUND[part.fg] ?? part.fg})`;
  if (part.bg) {
    style.backgroundColor = `rgb(${part.bg})`;
    // Keep text on a coloured background readable when the producer did not pick its colour.
    if (!part.fg) style.color = `rgb(${textOn(part.bg)})`;
  }
  const decorations = part.decorations ?? [];
  if (decorations.includes('bold')) style.fontWeight = 'bold';
  if (decorations.includes('italic')) style.fontStyle = 'italic';
  if (decorations.includes('underline')) style.textDecoration = 'underline';
  if (decorations.includes('dim')) style.opacity = 0.6;
  return style;
}

/** `content`, which starts at `offset` of the line, with the marks that fall inside it. */
function marked(content: string, offset: number, marks: readonly Mark[]): ReactNode {
  const pieces: ReactNode[] = [];
  let at = 0;
  for (const mark of marks) {
    const start = Math.max(mark.start - offset, at);
    const end = Math.min(mark.end - offset, content.length);
    if (end <= start) continue;
    if (start > at) pieces.push(content.slice(at, start));
    pieces.push(
      <mark key={start} className={mark.active ? 'match match-active' : 'match'}>
        {content.slice(start, end)}
      </mark>,
    );
    at = end;
  }
  if (pieces.length === 0) return content;
  if (at < content.length) pieces.push(content.slice(at));
  return pieces;
}

/**
 * One log line with its ANSI colours and decorations as styled spans (no escape codes left),
 * and `marks` (ranges of the plain text, in order) highlighted across those spans.
 */
export function AnsiLine({
  text,
  marks = [],
}: {
  text: string;
  marks?: readonly Mark[] | undefined;
}) {
  const parts = Anser.ansiToJson(text, { json: true, remove_empty: true });
  let offset = 0;
  return parts.map((part, index) => {
    const style = styleOf(part);
    const content = marked(part.content, offset, marks);
    offset += part.content.length;
    return Object.keys(style).length === 0 ? (
      <span key={index}>{content}</span>
    ) : (
      <span key={index} style={style}>
        {content}
      </span>
    );
  });
}
