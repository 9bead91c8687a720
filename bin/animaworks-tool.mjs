#!/usr/bin/env -S node --no-node-snapshot
// Kept so that scripts which ran this file before the launcher became CommonJS keep working; it starts
// ≈ 8 ms slower (an ES module entry loads Node's ES module loader). Use bin/animaworks-tool.cjs, or
// the `animaworks-tool` command.
import { createRequire } from "node:module";

createRequire(import.meta.url)("./animaworks-tool.cjs");
