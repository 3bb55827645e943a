import { useEffect, useRef, useState, type ReactNode } from 'react';

/**
 * A modal confirmation (the native <dialog>: focus stays inside, Escape cancels). The dialog
 * stays open, its buttons disabled, while `onConfirm` runs; it closes when that settles: the
 * page shows the result or the error.
 */
export function ConfirmDialog(props: {
  open: boolean;
  title: string;
  confirmLabel: string;
  /** A rollback or drain: the confirm button is red. */
  danger?: boolean;
  onConfirm(): Promise<void>;
  onClose(): void;
  children: ReactNode;
}) {
  const dialog = useRef<HTMLDialogElement>(null);
  const [busy, setBusy] = useState(false);
  const { open, onClose } = props;

  useEffect(() => {
    const element = dialog.current;
    if (!element) return;
    if (open && !element.open) element.showModal();
    if (!open && element.open) element.close();
  }, [open]);

  const confirm = async () => {
    setBusy(true);
    try {
      await props.onConfirm();
    } finally {
      setBusy(false);
      onClose();
    }
  };

  return (
    <dialog
      ref={dialog}
      className="dialog"
      aria-labelledby="dialog-title"
      onCancel={(event) => {
        // Escape while the change is on its way would hide its outcome: let it finish.
        if (busy) event.preventDefault();
        else onClose();
      }}
    >
      <h2 id="dialog-title">{props.title}</h2>
      <div className="dialog-body">{props.children}</div>
      <div className="dialog-actions">
        <button type="button" onClick={onClose} disabled={busy} autoFocus>
          Cancel
        </button>
        <button type="button" className={props.danger ? 'button-danger' : 'button-primary'} onClick={() => void confirm()} disabled={busy}>
          {busy ? 'Working…' : props.confirmLabel}
        </button>
      </div>
    </dialog>
  );
}
