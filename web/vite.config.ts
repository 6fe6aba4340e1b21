import { fileURLToPath } from 'node:url';
import react from '@vitejs/plugin-react';
import { defineConfig } from 'vite';

// The dashboard: built into dist/web and served by the server at /ui/.
export default defineConfig({
  root: fileURLToPath(new URL('.', import.meta.url)),
  base: '/ui/',
  plugins: [react()],
  // The SDK reads TAILWATER_SERVER / TAILWATER_TOKEN from process.env; a browser has none.
  define: { 'process.env': '{}' },
  build: {
    outDir: fileURLToPath(new URL('../dist/web', import.meta.url)),
    emptyOutDir: true,
  },
});
