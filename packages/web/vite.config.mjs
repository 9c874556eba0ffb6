// The web app's build: static files in dist/, served by the api at `/` (no CDN, works offline).
import { defineConfig } from 'vite';

export default defineConfig({
  root: import.meta.dirname,
  base: '/',
  oxc: { jsx: { runtime: 'automatic', importSource: 'react' } },
  build: { outDir: 'dist', emptyOutDir: true, sourcemap: true },
});
