/** How figures read on screen. A missing figure (null, undefined, not finite) is "—". */

export const missing = '—';

const isNumber = (value: number | null | undefined): value is number => typeof value === 'number' && Number.isFinite(value);

export function formatCount(value: number | null | undefined): string {
  return isNumber(value) ? Math.round(value).toLocaleString('en-US') : missing;
}

/** 0..1 as a percentage. */
export function formatShare(share: number | null | undefined, digits = 1): string {
  return isNumber(share) ? `${(share * 100).toFixed(digits)}%` : missing;
}

export function formatPercent(percent: number | null | undefined): string {
  return isNumber(percent) ? `${percent}%` : missing;
}

export function formatMs(ms: number | null | undefined): string {
  if (!isNumber(ms)) return missing;
  if (ms >= 10_000) return `${(ms / 1000).toFixed(1)} s`;
  if (ms >= 100) return `${Math.round(ms)} ms`;
  if (ms >= 10) return `${ms.toFixed(1)} ms`;
  return `${ms.toFixed(2)} ms`;
}

export function formatBytes(bytes: number | null | undefined): string {
  if (!isNumber(bytes)) return missing;
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let value = bytes;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit++;
  }
  return `${value >= 100 || unit === 0 ? Math.round(value) : value.toFixed(1)} ${units[unit]}`;
}

export function formatRate(perSecond: number | null | undefined): string {
  if (!isNumber(perSecond)) return missing;
  return `${perSecond >= 100 ? Math.round(perSecond) : perSecond.toFixed(perSecond >= 10 ? 1 : 2)}/s`;
}

/** candidate / baseline, e.g. "1.18×". */
export function formatRatio(ratio: number | null | undefined): string {
  return isNumber(ratio) ? `${ratio.toFixed(2)}×` : missing;
}

export function formatTime(unixMs: number | null | undefined): string {
  if (!isNumber(unixMs)) return missing;
  return new Date(unixMs).toLocaleTimeString('en-GB', { hour12: false });
}

export function formatDateTime(unixMs: number | null | undefined): string {
  if (!isNumber(unixMs)) return missing;
  const date = new Date(unixMs);
  return `${date.toLocaleDateString('en-CA')} ${date.toLocaleTimeString('en-GB', { hour12: false })}`;
}

/** "3 s ago", from `nowUnixMs`. */
export function formatAgo(unixMs: number | null | undefined, nowUnixMs: number): string {
  if (!isNumber(unixMs)) return missing;
  const seconds = Math.max(0, Math.round((nowUnixMs - unixMs) / 1000));
  if (seconds < 90) return `${seconds} s ago`;
  if (seconds < 90 * 60) return `${Math.round(seconds / 60)} min ago`;
  return `${Math.round(seconds / 3600)} h ago`;
}
