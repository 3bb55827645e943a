/** A horizontal bar: `used` of `total`, with the figures as its accessible name. */
export function UsageBar(props: { used: number; total: number; label: string; tone?: 'baseline' | 'candidate' | 'user-present' | 'background' | 'neutral' }) {
  const share = props.total > 0 ? Math.min(1, Math.max(0, props.used / props.total)) : 0;
  return (
    <div
      className={`usage-bar tone-${props.tone ?? 'neutral'}`}
      role="meter"
      aria-label={props.label}
      aria-valuemin={0}
      aria-valuemax={props.total}
      aria-valuenow={props.used}
      title={`${props.label}: ${props.used} of ${props.total}`}
    >
      <div className="usage-bar-fill" style={{ width: `${share * 100}%` }} />
    </div>
  );
}
