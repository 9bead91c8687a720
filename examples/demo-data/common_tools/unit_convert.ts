// A shared tool: every Anima of the data dir can use it. `animaworks-tool --demo unit_convert length 5 --from km --to mi`
const LENGTH_IN_METRES: Record<string, number> = { mm: 0.001, cm: 0.01, m: 1, km: 1000, in: 0.0254, ft: 0.3048, yd: 0.9144, mi: 1609.344 };

export function get_tool_schemas() {
  const units = Object.keys(LENGTH_IN_METRES);
  return [
    {
      name: "unit_convert_length",
      description: "Convert a length between metric and imperial units.",
      input_schema: {
        type: "object",
        properties: {
          value: { type: "number", description: "The length to convert" },
          from: { type: "string", enum: units, description: "Unit of the value" },
          to: { type: "string", enum: units, description: "Unit wanted" },
        },
        required: ["value", "from", "to"],
      },
    },
  ];
}

export function unit_convert_length(args: { value: number; from: string; to: string }) {
  const metres = args.value * (LENGTH_IN_METRES[args.from] as number);
  const result = metres / (LENGTH_IN_METRES[args.to] as number);
  return { value: args.value, from: args.from, to: args.to, result: Math.round(result * 1e6) / 1e6 };
}
