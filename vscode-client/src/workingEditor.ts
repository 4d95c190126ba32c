// Which editor a question is anchored to (no `vscode` import: unit-tested).

/** The active editor, else the one the user was last in while it is still open and visible: a question
 * asked from the context panel (a webview has the focus, so no text editor is active) stays anchored to
 * that file and its workspace folder. */
export function workingEditor<E extends { document: { isClosed: boolean } }>(
  active: E | undefined, last: E | undefined, visible: readonly E[],
): E | undefined {
  if (active) return active;
  return last && !last.document.isClosed && visible.includes(last) ? last : undefined;
}
