import js from '@eslint/js';
import reactHooks from 'eslint-plugin-react-hooks';
import tseslint from 'typescript-eslint';

// docs/ARCHITECTURE.md's import table, enforced: what each folder of src/ (and web/) may import.
const LAYERS = {
  model: [],
  store: ['model'],
  bus: ['model'],
  engine: ['model', 'store', 'bus'],
  http: ['engine', 'store', 'model'],
  client: ['model'],
  runner: ['client', 'model'],
  sources: ['engine', 'model'],
};
const FOLDERS = [...Object.keys(LAYERS), 'cli'];
const layerRules = Object.entries(LAYERS).map(([folder, allowed]) => ({
  files: [`src/${folder}/**/*.ts`],
  rules: {
    'no-restricted-imports': [
      'error',
      {
        patterns: [
          {
            group: FOLDERS.filter((f) => f !== folder && !allowed.includes(f)).map(
              (f) => `../${f}/*`,
            ),
            message: `src/${folder} imports only ${allowed.join(', ') || 'nothing of src'} (docs/ARCHITECTURE.md).`,
          },
        ],
      },
    ],
  },
}));
const WEB_ALLOWED = ['client', 'model'];
const webRule = {
  files: ['web/src/**/*.{ts,tsx}'],
  rules: {
    'no-restricted-imports': [
      'error',
      {
        patterns: [
          {
            group: FOLDERS.filter((f) => !WEB_ALLOWED.includes(f)).map((f) => `**/src/${f}/*`),
            message: 'web/ imports only src/client and src/model (docs/ARCHITECTURE.md).',
          },
        ],
      },
    ],
  },
};

export default tseslint.config(
  { ignores: ['dist/', 'node_modules/', 'tailwater-data/', 'test-output/'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: {
      globals: {
        process: 'readonly',
        console: 'readonly',
        Buffer: 'readonly',
        URL: 'readonly',
        setTimeout: 'readonly',
        clearTimeout: 'readonly',
        setInterval: 'readonly',
        clearInterval: 'readonly',
        setImmediate: 'readonly',
        fetch: 'readonly',
        AbortController: 'readonly',
        TextDecoder: 'readonly',
        TextEncoder: 'readonly',
        queueMicrotask: 'readonly',
      },
    },
    rules: {
      '@typescript-eslint/consistent-type-imports': 'error',
      '@typescript-eslint/no-unused-vars': [
        'error',
        { argsIgnorePattern: '^_', varsIgnorePattern: '^_', ignoreRestSiblings: true },
      ],
    },
  },
  {
    files: ['web/**/*.{ts,tsx}'],
    ...reactHooks.configs.flat.recommended,
  },
  {
    // The dashboard runs in a browser.
    files: ['web/**/*.{ts,tsx}'],
    languageOptions: {
      globals: {
        window: 'readonly',
        document: 'readonly',
        HTMLElement: 'readonly',
        HTMLDivElement: 'readonly',
        Element: 'readonly',
        EventTarget: 'readonly',
        KeyboardEvent: 'readonly',
        ReadableStream: 'readonly',
        AbortSignal: 'readonly',
        Event: 'readonly',
      },
    },
  },
  ...layerRules,
  webRule,
);
