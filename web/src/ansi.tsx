import Anser from 'anser';
import type { CSSProperties, ReactNode } from 'react';

/** One log line with its ANSI colours and decorations as styled spans (no escape codes left). */
export function AnsiLine({ text }: { text: string }): ReactNode {
  const parts = Anser.ansiToJson(text, { json: true, remove_empty: true });
  return parts.map((part, index) => {
    const style: CSSProperties = {};
    if (part.fg) style.color = `rgb(${part.fg})`;
    if (part.bg) style.backgroundColor = `rgb(${part.bg})`;
    const decorations = part.decorations ?? [];
    if (decorations.includes('bold')) style.fontWeight = 'bold';
    if (decorations.includes('italic')) style.fontStyle = 'italic';
    if (decorations.includes('underline')) style.textDecoration = 'underline';
    if (decorations.includes('dim')) style.opacity = 0.6;
    return Object.keys(style).length === 0 ? (
      <span key={index}>{part.content}</span>
    ) : (
      <span key={index} style={style}>
        {part.content}
      </span>
    );
  });
}
