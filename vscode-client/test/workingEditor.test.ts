import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import { workingEditor } from '../src/workingEditor';

type Ed = { name: string; document: { isClosed: boolean } };
const ed = (name: string, isClosed = false): Ed => ({ name, document: { isClosed } });

test('workingEditor: the active editor, else the last one while it is open and visible', () => {
  const a = ed('a');
  const b = ed('b');
  assert.equal(workingEditor(a, b, [a, b]), a);
  assert.equal(workingEditor(undefined, b, [a, b]), b); // the context panel has the focus
  assert.equal(workingEditor(undefined, b, [a]), undefined); // no longer visible
  assert.equal(workingEditor(undefined, ed('c', true), [a]), undefined); // closed
  assert.equal(workingEditor(undefined, undefined, [a]), undefined);
});
