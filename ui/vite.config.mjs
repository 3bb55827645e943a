// Builds the admin UI into dist/app, which the control plane serves (every non-/api path falls
// back to index.html, so the app routes with the history API). Absolute base: deep links such as
// /workers load /assets/... correctly.
import { defineConfig } from 'vite';
import react from '@vitejs/plugin-react';

export default defineConfig({
  plugins: [react()],
  base: '/',
  build: {
    outDir: 'dist/app',
    emptyOutDir: true,
    // The control plane's CSP allows scripts from 'self' only: no inline module preload polyfill.
    modulePreload: { polyfill: false },
  },
  server: {
    // `npm run dev --workspace @headroom/ui`: the API of a control plane on 8080 (npm start's).
    proxy: { '/api': process.env.HEADROOM_API_URL ?? 'http://127.0.0.1:8080' },
  },
});
