import dgram from "node:dgram";
import ipaddr from "ipaddr.js";

/**
 * A DNS server on 127.0.0.1 (UDP, a port of its own) for tests of the fetch capability's resolver,
 * which is pointed at it with `dns: { servers: [server.address] }`: nothing on the machine changes.
 * Each query's name (lower case, no trailing dot) is looked up in `zone`: addresses answer A (IPv4)
 * and AAAA (IPv6) queries, `"nxdomain"` answers that the name does not exist, `"silent"` (and any
 * name the zone does not know) is never answered, as an unresponsive authoritative server is not.
 */
export type ZoneEntry = string[] | "nxdomain" | "silent";

export interface DnsStandIn {
  /** `127.0.0.1:<port>`, as the resolver's `setServers` takes it. */
  address: string;
  /** Every name asked, with its type (`A`, `AAAA`, `TYPE<n>`), in arrival order. */
  queries: Array<{ name: string; type: string }>;
  close(): Promise<void>;
}

const TYPE_A = 1;
const TYPE_AAAA = 28;

export async function startDnsStandIn(zone: (name: string) => ZoneEntry | undefined): Promise<DnsStandIn> {
  const socket = dgram.createSocket("udp4");
  const queries: DnsStandIn["queries"] = [];
  socket.on("message", (message, remote) => {
    const question = parseQuestion(message);
    if (!question) return;
    const type = question.type === TYPE_A ? "A" : question.type === TYPE_AAAA ? "AAAA" : `TYPE${question.type}`;
    queries.push({ name: question.name, type });
    const entry = zone(question.name) ?? "silent";
    if (entry === "silent") return;
    const family = question.type === TYPE_A ? 4 : question.type === TYPE_AAAA ? 6 : 0;
    const answers = entry === "nxdomain" ? [] : entry.filter((address) => (address.includes(":") ? 6 : 4) === family);
    socket.send(response(message, question.end, entry === "nxdomain" ? 3 : 0, question.type, answers), remote.port, remote.address);
  });
  await new Promise<void>((resolve) => socket.bind(0, "127.0.0.1", resolve));
  return {
    address: `127.0.0.1:${socket.address().port}`,
    queries,
    close: () => new Promise<void>((resolve) => socket.close(() => resolve())),
  };
}

/** The first question of a query: its name, type, and where it ends (the response repeats it). */
function parseQuestion(message: Buffer): { name: string; type: number; end: number } | undefined {
  if (message.length < 12 || message.readUInt16BE(4) < 1) return undefined;
  const labels: string[] = [];
  let offset = 12;
  for (;;) {
    const length = message[offset];
    if (length === undefined || length > 63) return undefined;
    offset += 1;
    if (length === 0) break;
    labels.push(message.toString("latin1", offset, offset + length));
    offset += length;
  }
  if (offset + 4 > message.length) return undefined;
  return { name: labels.join(".").toLowerCase(), type: message.readUInt16BE(offset), end: offset + 4 };
}

/** A response repeating the query's header id and question, with `answers` of the asked type. */
function response(query: Buffer, questionEnd: number, rcode: number, type: number, answers: string[]): Buffer {
  const header = Buffer.alloc(12);
  header.writeUInt16BE(query.readUInt16BE(0), 0);
  header.writeUInt16BE(0x8180 | rcode, 2); // a response, recursion desired and available
  header.writeUInt16BE(1, 4);
  header.writeUInt16BE(answers.length, 6);
  const records = answers.map((address) => {
    const data = Buffer.from(ipaddr.parse(address).toByteArray());
    const record = Buffer.alloc(12);
    record.writeUInt16BE(0xc00c, 0); // the name: a pointer to the question's
    record.writeUInt16BE(type, 2);
    record.writeUInt16BE(1, 4); // class IN
    record.writeUInt32BE(60, 6); // TTL, in s
    record.writeUInt16BE(data.length, 10);
    return Buffer.concat([record, data]);
  });
  return Buffer.concat([header, query.subarray(12, questionEnd), ...records]);
}
