import { render, screen } from '@testing-library/react';
import { describe, expect, test } from 'vitest';
import { App, parseRoute } from '../src/App.js';
import { fakeTail } from './fake-tail.js';

describe('dashboard routes', () => {
  test('parses the paths PROTOCOL.md lists', () => {
    expect(parseRoute('/ui/')).toEqual({ view: 'runs' });
    expect(parseRoute('/ui')).toEqual({ view: 'runs' });
    expect(parseRoute('/ui/pipelines/ingest.daily/runs/latest')).toEqual({
      view: 'run',
      pipeline: 'ingest.daily',
      runId: 'latest',
    });
    expect(parseRoute('/ui/pipelines/a%2Fb/runs/r%201/')).toEqual({
      view: 'run',
      pipeline: 'a/b',
      runId: 'r 1',
    });
    expect(parseRoute('/ui/topics/iceberg')).toEqual({ view: 'topic', topic: 'iceberg' });
    expect(parseRoute('/ui/nothing/here')).toEqual({ view: 'notFound', path: '/ui/nothing/here' });
    expect(parseRoute('/ui/topics/%E0%A4%A')).toMatchObject({ view: 'notFound' });
  });

  test('renders the view of each route', () => {
    const fake = fakeTail();
    const { unmount } = render(<App pathname="/ui/topics/iceberg" tail={fake.tail} />);
    expect(screen.getByRole('heading', { level: 1 }).textContent).toBe(
      'Apache Iceberg Real-time Mutations',
    );
    unmount();
    render(<App pathname="/ui/pipelines/p/runs/latest" tail={fake.tail} />);
    expect(screen.getByRole('heading', { level: 1 }).textContent).toBe('p / latest');
    expect(fake.calls.map((call) => call.target)).toEqual([
      { topic: 'iceberg' },
      { pipeline: 'p', runId: 'latest' },
    ]);
  });
});
