import { execFileSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { type Server, type Socket, connect, createServer } from "node:net";

/**
 * Network namespaces that stand in for separate machines: each gets its own loopback and a veth pair to
 * this (the root) namespace, and nothing else. Needs root and iproute2 (`ip netns`).
 */
export interface NetNamespace {
  name: string;
  /** This namespace's end of the veth pair, as the machine inside sees it. */
  hostAddress: string;
  /** argv prefix that runs a command inside the namespace. */
  exec: string[];
  remove(): void;
}

export function netnsAvailable(): boolean {
  if (process.getuid?.() !== 0) return false;
  try {
    execFileSync("ip", ["netns", "list"], { stdio: "ignore" });
    return true;
  } catch {
    return false;
  }
}

/** A namespace with a veth pair on 10.<subnet>.<index>.0/24 (host side .1, inside .2). */
export function createNetNamespace(index: number): NetNamespace {
  const tag = randomBytes(3).toString("hex");
  const name = `awt${tag}${index}`;
  const outside = `awh${tag}${index}`; // interface names: at most 15 characters
  const inside = `awn${tag}${index}`;
  const subnet = 100 + (parseInt(tag.slice(0, 2), 16) % 100);
  const hostAddress = `10.${subnet}.${index}.1`;
  const ip = (...args: string[]) => execFileSync("ip", args, { stdio: "pipe" });
  ip("netns", "add", name);
  try {
    ip("link", "add", outside, "type", "veth", "peer", "name", inside);
    ip("link", "set", inside, "netns", name);
    ip("addr", "add", `${hostAddress}/24`, "dev", outside);
    ip("link", "set", outside, "up");
    ip("-n", name, "addr", "add", `10.${subnet}.${index}.2/24`, "dev", inside);
    ip("-n", name, "link", "set", inside, "up");
    ip("-n", name, "link", "set", "lo", "up");
  } catch (error) {
    ip("netns", "delete", name);
    throw error;
  }
  return {
    name,
    hostAddress,
    exec: ["ip", "netns", "exec", name],
    remove() {
      try {
        ip("link", "delete", outside); // removes its peer too
      } catch {
        // already gone with the namespace
      }
      ip("netns", "delete", name);
    },
  };
}

/** A TCP relay from `listenAddress` (an ephemeral port) to `target`; what a router to the database is. */
export async function tcpRelay(listenAddress: string, target: { host: string; port: number }): Promise<{ port: number; close(): Promise<void> }> {
  const sockets = new Set<Socket>();
  const server: Server = createServer((client) => {
    const upstream = connect(target.port, target.host);
    for (const socket of [client, upstream]) {
      sockets.add(socket);
      socket.on("close", () => sockets.delete(socket));
      socket.on("error", () => {
        client.destroy();
        upstream.destroy();
      });
    }
    client.pipe(upstream).pipe(client);
  });
  await new Promise<void>((resolve) => server.listen(0, listenAddress, resolve));
  const address = server.address();
  if (address === null || typeof address === "string") throw new Error("relay has no port");
  return {
    port: address.port,
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}
