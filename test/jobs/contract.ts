import { describe } from "vitest";
import { claimContract } from "./contract/claims.js";
import { leaseContract } from "./contract/leases.js";
import { type MakeStore, contractSetup } from "./contract/setup.js";
import { submitContract } from "./contract/submits.js";
import { upkeepContract } from "./contract/upkeep.js";

/** The behaviour every `JobStore` promises (src/jobs/store.ts). Call once per implementation. */
export function runJobStoreContract(name: string, makeStore: MakeStore): void {
  describe(`JobStore contract: ${name}`, () => {
    const setup = contractSetup(makeStore);
    submitContract(setup);
    claimContract(setup);
    leaseContract(setup);
    upkeepContract(setup);
  });
}
