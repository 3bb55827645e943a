/** GET `url` and its body as text; rejects on a status other than 2xx, after `timeoutMs`, or when `signal` aborts. */
export async function getText(url: string, timeoutMs: number, signal: AbortSignal): Promise<string> {
  const response = await fetch(url, { signal: AbortSignal.any([signal, AbortSignal.timeout(timeoutMs)]) });
  const text = await response.text();
  if (!response.ok) throw new Error(`GET ${url}: HTTP ${response.status} ${text.slice(0, 200)}`);
  return text;
}
