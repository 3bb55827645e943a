/**
 * Import rules for every workspace's sources and tests, checked by `npm run lint`.
 *
 * No cycles: in a cycle, which module finishes loading first depends on who imported it first
 * (one sees the other half-initialised), and modules that should stand apart can only be
 * understood, tested or moved together. Type-only imports count too: they tie modules' designs
 * together as much as values do, and become value imports with the next change.
 *
 * Imports between workspaces go through their packages' built output (dist/), which is not
 * cruised; cycles between workspaces are refused by `tsc --build` (project references cannot
 * form a cycle).
 */
module.exports = {
  forbidden: [
    {
      name: 'no-circular',
      severity: 'error',
      comment: 'This import closes a cycle: move what both sides need to a module of its own, or to the side it belongs to.',
      from: {},
      to: { circular: true },
    },
  ],
  options: {
    includeOnly: '^[^/]+/(src|test)/',
    // Matched against directories too (no trailing slash), so that the walk never enters them.
    exclude: { path: '(^|/)(node_modules|dist|\\.git)(/|$)' },
    doNotFollow: { path: '(^|/)node_modules(/|$)' },
    tsPreCompilationDeps: true,
    moduleSystems: ['es6', 'cjs'],
  },
};
