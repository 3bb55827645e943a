/** Text that may be long (worker ids, integration names): cut with an ellipsis, whole in the tooltip. */
export function Truncated({ text, className }: { text: string; className?: string }) {
  return (
    <span className={className ? `truncated ${className}` : 'truncated'} title={text}>
      {text}
    </span>
  );
}
