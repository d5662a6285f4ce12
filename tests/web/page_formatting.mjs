// The pages' own formatting functions (web/src/app.js: fmtPs, fmtPct, ...) for the tests,
// loaded in a bare context, so that a test checks what a page shows against the rule the page
// uses, not a copy of it.
import {readFileSync} from 'node:fs';
import vm from 'node:vm';

// window.podprof of app.js. It needs a window to hang podprof on and to listen for
// DOMContentLoaded, nothing else until a page draws.
export function pageFormatting() {
  const window = {addEventListener: () => {}};
  const source = readFileSync(new URL('../../web/src/app.js', import.meta.url), 'utf8');
  vm.runInNewContext(source, {window});
  return window.podprof;
}
