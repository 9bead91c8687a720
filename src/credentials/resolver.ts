import { ToolHostError } from "../errors.js";
import {
  type CredentialLog,
  type CredentialScope,
  type CredentialSource,
  type CredentialSources,
  type CredentialStore,
  SHARED_SCOPE,
  SILENT_LOG,
  animaScope,
  configCredentialKey,
  hostLog,
} from "./store.js";
import { SHARED_SECTION } from "./vault.js";

/**
 * `getCredential` (docs/design.md §7, docs/animaworks-reference.md §6): config.json → the vault (the caller's own section, then
 * `shared`) → shared/credentials.json → the allowed environment → `ToolConfigError`.
 *
 * Scoping (docs/design.md §9): the calling Anima comes from the host-side context, never from anything the
 * tool passes. Per-Anima secrets use AnimaWorks' env-style spelling `<BASE>__<anima>`; a name is read as
 * base = text before the FIRST `__`, owner = everything after it. That parse is unambiguous even for
 * Anima names containing `_` or `__`, and a name is served only when it has no owner (shared) or its
 * owner is exactly the caller (code-point equality: no case folding, no Unicode normalisation, so look-
 * alikes and case variants of another Anima's name are refused, not matched). Any other name containing
 * `__` — another Anima's, an empty base like `__proto__` — is refused with a `CredentialDeniedError`
 * before any source is consulted, whether or not a value exists, so the refusal reveals nothing. The
 * rule applies to all three names a tool passes (credential name, key name, variable name), because a
 * spelling trick must not work through any of them.
 */

/** Who is asking, as established by the host (never by the tool). */
export interface CallerContext {
  readonly anima: string;
}

export interface CredentialContext extends CallerContext {
  readonly sources: CredentialSources;
  readonly log?: CredentialLog;
}

/** What a tool asks for; mirrors `get_credential(credential_name, tool_name, key_name, env_var)`. */
export interface CredentialRequest {
  credentialName: string;
  toolName: string;
  /** Default "api_key" (config.json `api_key`); any other name reads `keys[keyName]`. */
  keyName?: string;
  /** The env-style name used for the vault, shared/credentials.json and the environment. Empty = none. */
  envVar?: string | null;
}

export interface ResolvedCredential {
  value: string;
  /** Which source answered, as written in the audit record. */
  source: CredentialSource;
  /** Where exactly, e.g. `vault.json [alice] SLACK_BOT_TOKEN__alice`; never contains the value. */
  location: string;
}

/**
 * A refused lookup: the name belongs to another Anima (or cannot be attributed safely). Type
 * `PermissionDenied` (exit code 4); `instanceof` lets the capability layer audit it as `denied`
 * where a plain `ToolConfigError` is audited as `missing`.
 */
export class CredentialDeniedError extends ToolHostError {
  readonly deniedName: string;

  constructor(toolName: string, deniedName: string, anima: string) {
    super(
      "PermissionDenied",
      `Tool '${toolName}' may not read credential '${deniedName}': a name containing '__' is a per-Anima credential and only '<NAME>__${anima}' belongs to the calling Anima`,
      `use '<NAME>' for a shared credential or '<NAME>__${anima}' for this Anima's own`,
    );
    this.name = "CredentialDeniedError";
    this.deniedName = deniedName;
  }
}

export type NameOwnership = "shared" | "own" | "denied";

/** Whose secret a name denotes, for the calling Anima (see the module comment for the rule). */
export function classifyCredentialName(name: string, anima: string): NameOwnership {
  const separator = name.indexOf("__");
  if (separator === -1) return "shared";
  const base = name.slice(0, separator);
  const owner = name.slice(separator + 2);
  return base !== "" && owner === anima ? "own" : "denied";
}

const MAX_NAME_CHARS = 256;
/** Control and format characters (zero-width, bidi overrides…) only serve to disguise a name in logs. */
const INVISIBLE = /[\p{Cc}\p{Cf}\u2028\u2029]/u;
/** Same rule as the registry's Anima names: a folder name that cannot address another folder. */
const ANIMA_NAME = /^(?!\.{1,2}$)[^/\\\0]{1,128}$/;

export async function getCredential(context: CredentialContext, request: CredentialRequest): Promise<ResolvedCredential> {
  const anima = callerOf(context);
  const credentialName = requireName(request.credentialName, "credentialName");
  const toolName = requireName(request.toolName, "toolName");
  const keyName = request.keyName === undefined ? "api_key" : requireName(request.keyName, "keyName");
  const envVar = request.envVar === undefined || request.envVar === null || request.envVar === "" ? undefined : requireName(request.envVar, "envVar");
  const log = context.log ?? SILENT_LOG;

  for (const name of [credentialName, keyName, envVar]) {
    if (name !== undefined && classifyCredentialName(name, anima) === "denied") {
      const denial = new CredentialDeniedError(toolName, name, anima);
      hostLog(log, "warn", `credential lookup refused for tool '${toolName}': '${name}' is not this Anima's to read`, anima);
      throw denial;
    }
  }

  const steps = lookupSteps(context.sources, anima, credentialName, keyName, envVar);
  for (const step of steps) {
    const value = await step.store.get(step.scope, step.key);
    if (value === undefined || value === "") continue;
    // Where it came from, never any character of it.
    hostLog(log, "debug", `Credential '${credentialName}.${keyName}' for tool '${toolName}' resolved from ${step.location}`, anima);
    return { value, source: step.store.source, location: step.location };
  }

  const places = [`config.json credentials.${credentialName}.${keyName}`];
  if (envVar !== undefined) places.push("vault.json", `environment variable ${envVar}`);
  // A variable set in the caller's shell but not allowed is the usual surprise: say so, and where to allow it.
  const notAllowed = envVar !== undefined && context.sources.environment.allows?.(envVar) === false;
  throw new ToolHostError(
    "ToolConfigError",
    `Tool '${toolName}' requires credential '${credentialName}'. Set it in: ${places.join(" or ")}`,
    notAllowed
      ? `the host reads environment variable ${envVar} only if the operator allows it: add it to "allowed_environment" in the "animaworks_tool" section of config.json (or $ANIMAWORKS_ALLOWED_ENVIRONMENT)`
      : undefined,
  );
}

interface LookupStep {
  store: CredentialStore;
  scope: CredentialScope;
  key: string;
  location: string;
}

function lookupSteps(sources: CredentialSources, anima: string, credentialName: string, keyName: string, envVar: string | undefined): LookupStep[] {
  const steps: LookupStep[] = [
    {
      store: sources.config,
      scope: SHARED_SCOPE,
      key: configCredentialKey(credentialName, keyName),
      location: `config.json credentials.${credentialName}.${keyName}`,
    },
  ];
  // Without an env-style name AnimaWorks consults config.json only (docs/animaworks-reference.md checklist 69).
  if (envVar === undefined) return steps;
  if (anima !== SHARED_SECTION) {
    steps.push({ store: sources.vault, scope: animaScope(anima), key: envVar, location: `vault.json [${anima}] ${envVar}` });
  }
  steps.push(
    { store: sources.vault, scope: SHARED_SCOPE, key: envVar, location: `vault.json [${SHARED_SECTION}] ${envVar}` },
    { store: sources.legacy, scope: SHARED_SCOPE, key: envVar, location: `shared/credentials.json ${envVar}` },
    { store: sources.environment, scope: SHARED_SCOPE, key: envVar, location: `environment variable ${envVar}` },
  );
  return steps;
}

function callerOf(context: CredentialContext): string {
  const anima: unknown = context?.anima;
  if (typeof anima !== "string" || !ANIMA_NAME.test(anima) || INVISIBLE.test(anima)) {
    // A host bug, not a tool's doing; refuse rather than guess whose secrets these are.
    throw new ToolHostError("PermissionDenied", "credential lookups need the calling Anima, and none valid was given");
  }
  return anima;
}

function requireName(value: unknown, field: string): string {
  if (typeof value !== "string" || value === "") throw new ToolHostError("InvalidArguments", `getCredential: ${field} must be a non-empty string`);
  if (value.length > MAX_NAME_CHARS) throw new ToolHostError("InvalidArguments", `getCredential: ${field} is longer than ${MAX_NAME_CHARS} characters`);
  if (INVISIBLE.test(value)) throw new ToolHostError("InvalidArguments", `getCredential: ${field} contains control or invisible characters`);
  return value;
}
