import './polyfills.js';
import { StrictMode } from 'react';
import { createRoot } from 'react-dom/client';
import { App } from './App.js';
import { applyTheme, resolveTheme, storedChoice } from './theme/theme.js';
import './theme/theme.css';
import './styles.css';

// Before the first render, so the page never shows in the other theme first.
applyTheme(resolveTheme(storedChoice()));

const root = document.getElementById('root');
if (root) {
  createRoot(root).render(
    <StrictMode>
      <App pathname={window.location.pathname + window.location.search + window.location.hash} />
    </StrictMode>,
  );
}
