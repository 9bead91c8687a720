/*
 * The host ↔ isolate contract (src/contract/isolate.ts and tool-globals.ts) as the prelude's parts see it. They are scripts
 * joined into one function scope (src/isolation/isolate/prelude-source.ts), which also holds the contract's
 * constants: the prelude script inlines the compiled contract ahead of them. Declarations only: nothing
 * here is emitted, and each one refers to the contract itself, so the two cannot drift apart.
 */

type GuestBridge = import("../src/contract/isolate.js").GuestBridge;
type GuestEntry = import("../src/contract/isolate.js").GuestEntry;
type LogLevel = import("../src/contract/isolate.js").LogLevel;
type CallEntryKind = import("../src/contract/isolate.js").CallEntryKind;
type CliPayload = import("../src/contract/isolate.js").CliPayload;
type CallEnvelope = import("../src/contract/isolate.js").CallEnvelope;
type DescribeEnvelope = import("../src/contract/isolate.js").DescribeEnvelope;
type FailureEnvelope = import("../src/contract/isolate.js").FailureEnvelope;
type CapabilityName = import("../src/contract/isolate.js").CapabilityName;
type CapabilityArgs<N extends CapabilityName> = import("../src/contract/isolate.js").CapabilityArgs<N>;
type CapabilityAnswerValue<N extends CapabilityName> = import("../src/contract/isolate.js").CapabilityAnswerValue<N>;
type CapabilityAnswer = import("../src/contract/isolate.js").CapabilityAnswer;
type FetchInit = import("../src/contract/isolate.js").FetchInit;
type FileEncoding = import("../src/contract/isolate.js").FileEncoding;
type ContextFlavour = import("../src/contract/isolate.js").ContextFlavour;
type ToolApiExport = import("../src/contract/tool-api.js").ToolApiExport;

declare const BIND_GLOBAL: typeof import("../src/contract/isolate.js").BIND_GLOBAL;
declare const PYTHON_BOOT_GLOBALS: typeof import("../src/contract/tool-globals.js").PYTHON_BOOT_GLOBALS;
declare const TOOL_GLOBALS: typeof import("../src/contract/tool-globals.js").TOOL_GLOBALS;
declare const TYPED_ARRAY_GLOBALS: typeof import("../src/contract/tool-globals.js").TYPED_ARRAY_GLOBALS;
declare const TOOL_INTL_MEMBERS: typeof import("../src/contract/tool-globals.js").TOOL_INTL_MEMBERS;
declare const TOOL_INTL_CONSTRUCTORS: typeof import("../src/contract/tool-globals.js").TOOL_INTL_CONSTRUCTORS;
declare const COLLECT_GARBAGE_GLOBAL: typeof import("../src/contract/tool-globals.js").COLLECT_GARBAGE_GLOBAL;
declare const INVALID_INPUT_ERROR_TYPE: typeof import("../src/contract/isolate.js").INVALID_INPUT_ERROR_TYPE;
declare const MAX_TOOL_MESSAGE_CHARS: typeof import("../src/contract/isolate.js").MAX_TOOL_MESSAGE_CHARS;
declare const MAX_TOOL_STACK_CHARS: typeof import("../src/contract/isolate.js").MAX_TOOL_STACK_CHARS;
declare const MAX_TIMERS_PER_CALL: typeof import("../src/contract/isolate.js").MAX_TIMERS_PER_CALL;
declare const MAX_TIMER_DELAY_MS: typeof import("../src/contract/isolate.js").MAX_TIMER_DELAY_MS;
declare const MAX_CAPABILITIES_IN_FLIGHT: typeof import("../src/contract/isolate.js").MAX_CAPABILITIES_IN_FLIGHT;
