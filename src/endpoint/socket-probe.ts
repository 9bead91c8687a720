import { connect } from "node:net";
import { socketAddress } from "./paths.js";

/** True when something accepts connections on `socket` (a live host); false for none or a stale file. */
export function answers(socket: string): Promise<boolean> {
  return new Promise((resolve) => {
    const probe = connect(socketAddress(socket));
    const timer = setTimeout(() => finish(true), 2_000); // accepted but silent: a host that is busy, not gone
    const finish = (live: boolean): void => {
      clearTimeout(timer);
      probe.destroy();
      resolve(live);
    };
    probe.once("connect", () => finish(true));
    probe.once("error", () => finish(false));
  });
}
