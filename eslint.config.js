// ESLint (flat config), run by `npm run lint` and CI. TypeScript is linted with type information:
// typescript-eslint's project service checks each file in the program of its nearest tsconfig.json
// (tsconfig.json for src/, sandbox/tsconfig.json, tools/tsconfig.json, test/tsconfig.json). JavaScript
// (benchmarks/, scripts/, bin/, the .mjs helpers of test/) gets the plain JavaScript rules only.
// Formatting is Prettier's business (`npm run format:check`), not ESLint's: no stylistic rules here.
import js from "@eslint/js";
import { defineConfig } from "eslint/config";
import globals from "globals";
import tseslint from "typescript-eslint";

export default defineConfig(
  {
    ignores: [
      "dist/",
      "node_modules/",
      "coverage/",
      ".vitest-cache/",
      // Tool fixtures are inputs to the host under test, not project code: many are deliberately
      // broken or hostile (syntax errors, sandbox escapes, bombs).
      "test/fixtures/",
      // The demo's data dir: example tools and what the demo writes there at run time.
      "examples/",
    ],
  },
  {
    linterOptions: { reportUnusedDisableDirectives: "error" },
  },

  js.configs.recommended,
  {
    rules: {
      "no-console": "off",
      // Matching control characters is what this code does on purpose (escaping them in output, audit
      // records and child stderr; refusing them in HTTP headers).
      "no-control-regex": "off",
    },
  },

  // TypeScript: recommended + the type-aware recommended set (not the strict one), plus the rules of #33.
  {
    files: ["**/*.ts", "**/*.mts", "**/*.cts"],
    extends: [tseslint.configs.recommendedTypeChecked],
    languageOptions: {
      parserOptions: {
        projectService: {
          // The files that no tsconfig.json includes, checked with test/tsconfig.json's options.
          allowDefaultProject: ["vitest.config.ts", "sandbox/animaworks-tool.d.ts"],
          defaultProject: "test/tsconfig.json",
        },
        tsconfigRootDir: import.meta.dirname,
      },
    },
    rules: {
      "@typescript-eslint/no-floating-promises": "error",
      // Among others: `if (isCancelled())` where isCancelled returns a promise (always truthy), and an
      // async function passed where a callback's result is ignored.
      "@typescript-eslint/no-misused-promises": "error",
      "@typescript-eslint/await-thenable": "error",
      // A switch over a union must name every member, unless it has a `default` (a deliberate catch-all).
      "@typescript-eslint/switch-exhaustiveness-check": ["error", { considerDefaultExhaustiveForUnions: true }],
      // `typeof import("esbuild")` stays allowed: it keeps a module that may only be loaded on demand
      // out of the static imports (test/architecture/), and it is the only way a global .d.ts script
      // (sandbox/isolate-contract.d.ts) can name a module's types.
      "@typescript-eslint/consistent-type-imports": ["error", { prefer: "type-imports", fixStyle: "inline-type-imports", disallowTypeAnnotations: false }],
      "@typescript-eslint/no-unused-vars": [
        "error",
        { argsIgnorePattern: "^_", varsIgnorePattern: "^_", caughtErrorsIgnorePattern: "^_", destructuredArrayIgnorePattern: "^_" },
      ],
      // A caught error (or an abort's reason) is passed on as it came: it is `unknown`, and wrapping it
      // would lose what it is. Anything else thrown or rejected must be an Error.
      "@typescript-eslint/only-throw-error": ["error", { allowRethrowing: true, allowThrowingUnknown: true, allowThrowingAny: true }],
      // `AbortSignal.reason` is typed `any`: rejecting with it passes the abort on as it came.
      "@typescript-eslint/prefer-promise-reject-errors": ["error", { allowThrowingUnknown: true, allowThrowingAny: true }],
      // A `let` assigned once, after closures that read it were made (a stream's decoder, a handle a
      // callback closes), cannot be a `const`.
      "prefer-const": ["error", { ignoreReadBeforeAssign: true }],
      // Off: an `async` method without `await` is how a synchronous implementation (SQLite, stdio)
      // meets a promise-returning interface that another (PostgreSQL, sockets) needs; ~70 such findings,
      // none a bug.
      "@typescript-eslint/require-await": "off",
      // Off: no-unnecessary-condition was tried and left out: most of its ~80 findings are deliberate
      // checks on values the types cannot vouch for (answers from other processes, hostile tool code,
      // flags set by callbacks).
    },
  },
  {
    // Tests read JSON (CLI output, audit lines, job results) as `any` on purpose: the no-unsafe-* rules
    // would flag every `JSON.parse(stdout).field` (~120 findings).
    files: ["test/**/*.ts"],
    rules: {
      "@typescript-eslint/no-unsafe-assignment": "off",
      "@typescript-eslint/no-unsafe-member-access": "off",
      "@typescript-eslint/no-unsafe-call": "off",
      "@typescript-eslint/no-unsafe-return": "off",
      "@typescript-eslint/no-unsafe-argument": "off",
      // Test doubles pass a store's or a host's methods around (`close: store.close`), bound or not on purpose.
      "@typescript-eslint/unbound-method": "off",
    },
  },
  {
    // The prelude captures intrinsics (`const mapGet = Map.prototype.get`) before tool code runs and
    // calls them with Reflect.apply, so that a tool cannot patch what it relies on: unbound on purpose.
    files: ["sandbox/**/*.ts"],
    rules: { "@typescript-eslint/unbound-method": "off" },
  },

  // Node.js code: the host, its tests, the scripts, the benchmarks, the launcher, the config files.
  {
    files: ["src/**", "test/**", "scripts/**", "benchmarks/**", "bin/**", "*.js", "*.ts"],
    languageOptions: { globals: { ...globals.node } },
  },
  // Code that runs inside the isolate (sandbox/) and core tools (tools/): standard ECMAScript only.
  {
    files: ["sandbox/**", "tools/**"],
    languageOptions: { globals: { ...globals.es2022 } },
  },
);
