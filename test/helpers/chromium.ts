import { spawn, spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Readable, Writable } from "node:stream";
import { pathToFileURL } from "node:url";

/**
 * A real headless browser for the HTML audit report: the system's Chromium (Debian's `chromium`; CI
 * installs it, .ci/run), driven over the DevTools protocol on a pipe (`--remote-debugging-pipe`: fd 3
 * in, fd 4 out, messages ended by NUL), so that nothing is downloaded and no port is opened. It opens one
 * page and reports what the page did: its DOM after load, console errors and uncaught exceptions, every
 * request it made, its load timing and, if asked, a screenshot.
 *
 * Imports Node's modules only: benchmarks/audit-html.mjs runs it with Node's type stripping.
 */
export function findChromium(): string | undefined {
  for (const name of ["chromium", "chromium-browser", "google-chrome"]) {
    if (spawnSync(name, ["--version"], { stdio: "ignore" }).status === 0) return name;
  }
  return undefined;
}

export interface PageVisit {
  /** `document.documentElement.outerHTML` after the load event. */
  dom: string;
  /** Console errors, uncaught exceptions and browser log errors (a CSP violation is one). */
  errors: string[];
  /** Every URL the page asked for, the page's own first. */
  requests: string[];
  /** From the navigation's start, ms: DOMContentLoaded, the load event's end, the first contentful paint. */
  timing: { domContentLoadedMs: number; loadMs: number; firstContentfulPaintMs?: number };
  /** The result of `evaluate`, if given. */
  evaluated?: unknown;
  /** A PNG of the viewport, when `screenshot` was asked. */
  screenshot?: Buffer;
}

export interface VisitOptions {
  width?: number;
  height?: number;
  screenshot?: boolean;
  /** An expression evaluated in the page after load (its value is returned as `evaluated`). */
  evaluate?: string;
  /** A page opened first in the same tab, so that the page measured finds the browser's renderer started. */
  warmUp?: string;
  /** The whole visit's bound. Default: 30 s. */
  timeoutMs?: number;
}

type Message = {
  id?: number;
  method?: string;
  params?: Record<string, unknown>;
  result?: Record<string, unknown>;
  error?: { message: string };
  sessionId?: string;
};

export async function visitPage(browser: string, file: string, options: VisitOptions = {}): Promise<PageVisit> {
  const profile = mkdtempSync(join(tmpdir(), "awt-chromium-"));
  const child = spawn(
    browser,
    [
      "--headless",
      "--no-sandbox",
      "--disable-gpu",
      "--no-first-run",
      "--no-default-browser-check",
      "--disable-extensions",
      "--disable-background-networking",
      "--disable-component-update",
      `--user-data-dir=${profile}`,
      "--remote-debugging-pipe",
      "about:blank",
    ],
    { stdio: ["ignore", "ignore", "pipe", "pipe", "pipe"] },
  );
  let stderr = "";
  child.stderr?.on("data", (chunk: Buffer) => (stderr = (stderr + chunk.toString()).slice(-4_000)));
  const toBrowser = child.stdio[3] as Writable;
  const fromBrowser = child.stdio[4] as Readable;
  // The pipes break when the browser ends (or fails to start): the visit's deadline reports that, not a stream error.
  toBrowser.on("error", () => {});
  fromBrowser.on("error", () => {});
  child.on("error", () => {});
  const pending = new Map<number, { resolve: (m: Message) => void; reject: (e: Error) => void }>();
  const listeners: Array<(m: Message) => void> = [];
  let nextId = 0;
  let buffer = "";
  fromBrowser.on("data", (chunk: Buffer) => {
    buffer += chunk.toString("utf8");
    let end: number;
    while ((end = buffer.indexOf("\0")) >= 0) {
      const message = JSON.parse(buffer.slice(0, end)) as Message;
      buffer = buffer.slice(end + 1);
      if (message.id !== undefined) {
        const waiter = pending.get(message.id);
        pending.delete(message.id);
        if (message.error) waiter?.reject(new Error(message.error.message));
        else waiter?.resolve(message);
      } else for (const listener of listeners) listener(message);
    }
  });
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  const send = (method: string, params: Record<string, unknown> = {}, sessionId?: string): Promise<Message> =>
    new Promise((resolve, reject) => {
      const id = ++nextId;
      pending.set(id, { resolve, reject });
      toBrowser.write(`${JSON.stringify({ id, method, params, ...(sessionId ? { sessionId } : {}) })}\0`);
    });
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new Error(`chromium did not finish within ${options.timeoutMs ?? 30_000} ms; its stderr: ${stderr}`)),
      options.timeoutMs ?? 30_000,
    );
  });
  const visit = async (): Promise<PageVisit> => {
    const errors: string[] = [];
    const requests: string[] = [];
    let loaded = () => {};
    listeners.push((message) => {
      const params = message.params ?? {};
      if (message.method === "Page.loadEventFired") loaded();
      else if (message.method === "Network.requestWillBeSent") requests.push(String((params["request"] as { url: string }).url));
      else if (message.method === "Runtime.exceptionThrown") errors.push(JSON.stringify(params["exceptionDetails"]));
      else if (message.method === "Runtime.consoleAPICalled" && (params["type"] === "error" || params["type"] === "assert"))
        errors.push(JSON.stringify(params["args"]));
      else if (message.method === "Log.entryAdded" && (params["entry"] as { level: string }).level === "error") errors.push(JSON.stringify(params["entry"]));
    });
    const targets = (await send("Target.getTargets")).result?.["targetInfos"] as Array<{ targetId: string; type: string }>;
    const page =
      targets.find((t) => t.type === "page")?.targetId ?? ((await send("Target.createTarget", { url: "about:blank" })).result?.["targetId"] as string);
    const session = (await send("Target.attachToTarget", { targetId: page, flatten: true })).result?.["sessionId"] as string;
    for (const domain of ["Page", "Runtime", "Log", "Network"]) await send(`${domain}.enable`, {}, session);
    const width = options.width ?? 1280;
    const height = options.height ?? 900;
    await send("Emulation.setDeviceMetricsOverride", { width, height, deviceScaleFactor: 1, mobile: false }, session);
    const open = async (path: string) => {
      const load = new Promise<void>((resolve) => (loaded = resolve));
      await send("Page.navigate", { url: pathToFileURL(path).href }, session);
      await load;
    };
    if (options.warmUp !== undefined) {
      await open(options.warmUp);
      errors.length = 0;
      requests.length = 0;
    }
    await open(file);
    const value = async (expression: string): Promise<unknown> =>
      ((await send("Runtime.evaluate", { expression, awaitPromise: true, returnByValue: true }, session)).result?.["result"] as { value?: unknown }).value;
    // One frame after load, so that the first paint has happened and is measured.
    const timing = (await value(`new Promise((resolve) => requestAnimationFrame(() => setTimeout(() => {
      const nav = performance.getEntriesByType("navigation")[0];
      const fcp = performance.getEntriesByType("paint").find((p) => p.name === "first-contentful-paint");
      resolve({ domContentLoadedMs: nav.domContentLoadedEventEnd, loadMs: nav.loadEventEnd, ...(fcp ? { firstContentfulPaintMs: fcp.startTime } : {}) });
    }, 0)))`)) as PageVisit["timing"];
    const dom = (await value("document.documentElement.outerHTML")) as string;
    const evaluated = options.evaluate !== undefined ? await value(options.evaluate) : undefined;
    const shot = options.screenshot ? ((await send("Page.captureScreenshot", { format: "png" }, session)).result?.["data"] as string) : undefined;
    return {
      dom,
      errors,
      requests,
      timing,
      ...(options.evaluate !== undefined ? { evaluated } : {}),
      ...(shot ? { screenshot: Buffer.from(shot, "base64") } : {}),
    };
  };
  try {
    return await Promise.race([visit(), deadline]);
  } finally {
    clearTimeout(timer);
    void send("Browser.close").catch(() => {});
    // The browser this call started, by its own handle: a bounded wait, then SIGKILL.
    const closing = setTimeout(() => child.kill("SIGKILL"), 5_000);
    await exited;
    clearTimeout(closing);
    rmSync(profile, { recursive: true, force: true });
  }
}
