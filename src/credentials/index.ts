export { MASK, MIN_REDACTED_SECRET_CHARS, maskSecret, redactSecrets, secretRedactor } from "./mask.js";
export {
  type CallerContext,
  type CredentialContext,
  type CredentialRequest,
  CredentialDeniedError,
  type NameOwnership,
  type ResolvedCredential,
  classifyCredentialName,
  getCredential,
} from "./resolver.js";
export {
  type CredentialLog,
  type CredentialScope,
  type CredentialSource,
  type CredentialSources,
  type CredentialStore,
  SHARED_SCOPE,
  animaScope,
  configCredentialKey,
} from "./store.js";
export {
  ConfigCredentialStore,
  type CredentialSourceOptions,
  EnvironmentCredentialStore,
  LegacyCredentialStore,
  VaultCredentialStore,
  openCredentialSources,
} from "./stores.js";
export { SHARED_SECTION, Vault } from "./vault.js";
