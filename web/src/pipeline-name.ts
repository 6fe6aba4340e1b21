/**
 * Whether a pipeline's FQN matches the runs list's name filter as the server matches it
 * (`GET /api/v1/pipelines?name=`, docs/API.md): a glob when it holds a `*` (`*` any run of
 * characters, nothing else special), else text the FQN must contain; case-sensitive.
 */
export function nameMatches(filter: string, fqn: string): boolean {
  if (filter === '') return true;
  if (!filter.includes('*')) return fqn.includes(filter);
  const parts = filter.split('*');
  const first = parts[0]!;
  const last = parts[parts.length - 1]!;
  if (!fqn.startsWith(first) || fqn.length < first.length + last.length) return false;
  let at = first.length;
  for (const part of parts.slice(1, -1)) {
    const found = fqn.indexOf(part, at);
    if (found < 0) return false;
    at = found + part.length;
  }
  return fqn.length - last.length >= at && fqn.endsWith(last);
}
