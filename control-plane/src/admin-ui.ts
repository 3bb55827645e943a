import * as fs from 'node:fs';
import * as path from 'node:path';
import express from 'express';
import { ConfigError } from '@headroom/common';

/**
 * Serves the built admin UI: its hashed assets for a year (a new build has new names), and
 * index.html, never cached, for every other GET so that the app's own routes load on refresh.
 * helmet's headers (CSP script-src 'self', no framing, nosniff) apply to all of it.
 */
export function adminUi(directory: string): express.Router {
  const index = path.join(directory, 'index.html');
  if (!fs.existsSync(index)) throw new ConfigError(`uiDirectory: no index.html in ${directory}; build the UI with npm run build`);
  const router = express.Router();
  router.use('/assets', express.static(path.join(directory, 'assets'), { immutable: true, maxAge: '365d' }));
  router.use('/assets', (_request, response) => void response.status(404).type('text/plain').send('no such asset'));
  router.use(express.static(directory, { index: false }));
  router.get(/.*/, (_request, response) => {
    response.setHeader('cache-control', 'no-cache');
    response.sendFile(index);
  });
  return router;
}
