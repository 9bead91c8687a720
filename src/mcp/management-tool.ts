/** A tool the MCP server itself provides (file, reload, share and job management), beside the Anima's own tools. */
export interface ManagementTool {
  name: string;
  description: string;
  inputSchema: { type: "object"; properties: Record<string, unknown>; required?: string[]; additionalProperties?: boolean };
  /**
   * Returns the text of the result, or a result that is an error (`isError`: e.g. a refresh in which a tool
   * failed, the result of a failed job); a thrown ToolHostError becomes an `isError` result too.
   */
  run(args: Record<string, unknown>): Promise<string | { text: string; isError: true }>;
}
