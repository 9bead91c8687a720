import { execFileSync } from "node:child_process";
import { chownSync, existsSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";

/**
 * A PostgreSQL server of a test's own (initdb in a temporary folder, a free port on 127.0.0.1, trust
 * authentication), for tests that stop or restart the server: the machine's shared one must keep serving
 * the other test files. Needs root (the server runs as the `postgres` user) and PostgreSQL's binaries.
 */
export interface PrivatePostgres {
  url: string;
  restart(): void;
  stop(): void;
}

function binDir(): string | undefined {
  try {
    return execFileSync("pg_config", ["--bindir"], { encoding: "utf8" }).trim();
  } catch {
    const root = "/usr/lib/postgresql";
    const versions = existsSync(root) ? readdirSync(root).sort((a, b) => Number(b) - Number(a)) : [];
    return versions.map((version) => join(root, version, "bin")).find((dir) => existsSync(join(dir, "initdb")));
  }
}

function postgresUser(): { uid: number; gid: number } | undefined {
  try {
    const id = (flag: string) => Number(execFileSync("id", [flag, "postgres"], { encoding: "utf8" }).trim());
    return { uid: id("-u"), gid: id("-g") };
  } catch {
    return undefined;
  }
}

export function privatePostgresAvailable(): boolean {
  return process.getuid?.() === 0 && binDir() !== undefined && postgresUser() !== undefined;
}

async function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const server = createServer().listen(0, "127.0.0.1", () => {
      const address = server.address();
      server.close(() => resolve(typeof address === "object" && address ? address.port : 0));
    });
  });
}

export async function startPrivatePostgres(): Promise<PrivatePostgres> {
  const bin = binDir() as string;
  const user = postgresUser() as { uid: number; gid: number };
  const dir = mkdtempSync(join(tmpdir(), "awt-pg-"));
  chownSync(dir, user.uid, user.gid);
  const port = await freePort();
  const asPostgres = (command: string, args: string[]) =>
    execFileSync("runuser", ["-u", "postgres", "--", join(bin, command), ...args], { stdio: "pipe", cwd: dir });
  const data = join(dir, "data");
  asPostgres("initdb", ["-D", data, "-A", "trust", "-U", "postgres", "--no-sync"]);
  const options = ["-D", data, "-w", "-l", join(dir, "server.log"), "-o", `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c fsync=off`];
  asPostgres("pg_ctl", [...options, "start"]);
  return {
    url: `postgres://postgres@127.0.0.1:${port}/postgres`,
    restart: () => void asPostgres("pg_ctl", [...options, "-m", "fast", "restart"]),
    stop() {
      try {
        asPostgres("pg_ctl", ["-D", data, "-m", "immediate", "stop"]);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    },
  };
}
