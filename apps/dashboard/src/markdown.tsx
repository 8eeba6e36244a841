import { Fragment, type ReactNode } from 'react';

/** Inline markdown: `code`, **bold**, and [links](https://...) (http/https only). */
function inline(text: string): ReactNode[] {
  const out: ReactNode[] = [];
  const pattern = /(`[^`]+`|\*\*[^*]+\*\*|\[[^\]]+\]\((https?:\/\/[^)\s]+)\))/g;
  let last = 0;
  let match: RegExpExecArray | null;
  let n = 0;
  while ((match = pattern.exec(text)) !== null) {
    if (match.index > last) out.push(text.slice(last, match.index));
    const token = match[0];
    if (token.startsWith('`')) out.push(<code key={n++}>{token.slice(1, -1)}</code>);
    else if (token.startsWith('**')) out.push(<strong key={n++}>{token.slice(2, -2)}</strong>);
    else {
      const label = token.slice(1, token.indexOf(']'));
      out.push(
        <a key={n++} href={match[2]} target="_blank" rel="noreferrer noopener">
          {label}
        </a>,
      );
    }
    last = match.index + token.length;
  }
  if (last < text.length) out.push(text.slice(last));
  return out;
}

/**
 * A small, safe markdown renderer for instructions: headings, paragraphs, bullet and numbered
 * lists, fenced code and inline code. Everything becomes React text, so nothing in the text can
 * inject HTML.
 */
export function Markdown({ source }: { source: string }) {
  const blocks: ReactNode[] = [];
  const lines = source.replaceAll('\r\n', '\n').split('\n');
  let i = 0;
  let key = 0;
  while (i < lines.length) {
    const line = lines[i] ?? '';
    if (line.startsWith('```')) {
      const code: string[] = [];
      i += 1;
      while (i < lines.length && !(lines[i] ?? '').startsWith('```')) code.push(lines[i++] ?? '');
      i += 1;
      blocks.push(
        <pre key={key++} className="code-block">
          <code>{code.join('\n')}</code>
        </pre>,
      );
      continue;
    }
    const heading = /^(#{1,6})\s+(.*)$/.exec(line);
    if (heading) {
      const level = Math.min((heading[1] ?? '#').length + 2, 6);
      const Tag = `h${level}` as 'h3';
      blocks.push(<Tag key={key++}>{inline(heading[2] ?? '')}</Tag>);
      i += 1;
      continue;
    }
    if (/^\s*([-*]|\d+\.)\s+/.test(line)) {
      const ordered = /^\s*\d+\./.test(line);
      const items: string[] = [];
      while (i < lines.length && /^\s*([-*]|\d+\.)\s+/.test(lines[i] ?? '')) items.push((lines[i++] ?? '').replace(/^\s*([-*]|\d+\.)\s+/, ''));
      const List = ordered ? 'ol' : 'ul';
      blocks.push(
        <List key={key++}>
          {items.map((item, index) => (
            <li key={index}>{inline(item)}</li>
          ))}
        </List>,
      );
      continue;
    }
    if (line.trim() === '') {
      i += 1;
      continue;
    }
    const paragraph: string[] = [];
    while (i < lines.length && (lines[i] ?? '').trim() !== '' && !/^(#{1,6}\s|```|\s*([-*]|\d+\.)\s)/.test(lines[i] ?? ''))
      paragraph.push(lines[i++] ?? '');
    blocks.push(
      <p key={key++}>
        {paragraph.map((text, index) => (
          <Fragment key={index}>
            {index > 0 && ' '}
            {inline(text)}
          </Fragment>
        ))}
      </p>,
    );
  }
  return <div className="markdown">{blocks}</div>;
}
