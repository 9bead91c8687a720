import type { ErrorInfo } from "../errors.js";
import type { DiscoveryProblem, ToolOrigin } from "./discovery.js";
import type { ProfileEntry } from "./profile.js";

/** What a host lists of the tools an Anima sees (`ToolHost.list`, `describe`): plain data. */

export interface SchemaInfo {
  name: string;
  action: string;
  description: string;
  parameters: Record<string, unknown>;
  /** What results must match (`output_schema`), if the tool declares it. */
  outputSchema?: Record<string, unknown>;
  profile?: ProfileEntry;
}

export interface ToolInfo {
  name: string;
  origin: ToolOrigin;
  status: "ok" | "error";
  error?: ErrorInfo;
  schemas: SchemaInfo[];
  hasCliMain: boolean;
  /** Content hash of the built tool (changes with any edit of it or its helpers). */
  bundleHash?: string;
}

export interface ToolListing {
  anima: string | undefined;
  tools: ToolInfo[];
  /** Files that were not loaded as tools, with the reason. */
  problems: DiscoveryProblem[];
}
