import { useWhyReadOnly } from '../session';

/** Says, next to disabled controls, why they are disabled. */
export function ReadOnlyNote() {
  const why = useWhyReadOnly();
  if (!why) return null;
  return (
    <p className="notice notice-info" role="note">
      {why}
    </p>
  );
}
