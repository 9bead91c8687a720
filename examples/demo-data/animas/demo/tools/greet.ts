// A personal tool of the demo Anima: `animaworks-tool --demo greet hello Operator`.
import { logger } from "@animaworks/tool";

export function get_tool_schemas() {
  return [
    {
      name: "greet_hello",
      description: "Greet someone by name, optionally several times.",
      input_schema: {
        type: "object",
        properties: {
          name: { type: "string", description: "Who to greet" },
          times: { type: "integer", description: "How many greetings", default: 1, minimum: 1, maximum: 5 },
          shout: { type: "boolean", description: "Upper-case the greeting" },
        },
        required: ["name"],
      },
    },
  ];
}

export function dispatch(name: string, args: { name: string; times?: number; shout?: boolean; anima_dir?: string }) {
  const { anima_dir: _animaDir, ...params } = args;
  if (name !== "greet_hello") throw new Error(`Unknown tool: ${name}`);
  logger.info(`greeting ${params.name}`);
  const line = `Hello, ${params.name}!`;
  const text = params.shout ? line.toUpperCase() : line;
  return Array.from({ length: params.times ?? 1 }, () => text).join("\n");
}
