import { describe, expect, it } from "vitest";
import { CLONE_NAMESPACE_FLAGS, CLONE_THREAD, SECCOMP_ARCHES, seccompProgram } from "../../../src/isolation/os/seccomp-filter.js";

/**
 * The seccomp programs as the kernel runs them, for every architecture they are built for: a classic
 * BPF interpreter (the five instructions the filter uses) runs each program over `struct seccomp_data`
 * made here. On x86_64 test/security/os-sandbox.test.ts also loads it into real sandbox processes; this
 * is what checks the aarch64 program on a machine that cannot run it.
 */
const ALLOW = 0x7fff0000;
const KILL_PROCESS = 0x80000000;
const errno = (code: number) => 0x00050000 | code;
const EPERM = 1;
const ENOSYS = 38;
const AF_UNIX = 1;
const AF_INET = 2;
const SIGCHLD = 17;
const CLONE_VM = 0x100;
const CLONE_NEWUSER = 0x10000000;

/** Runs `program` on one system call: its number, the caller's audit arch and arg0 (`seccomp_data`). */
function run(program: Buffer, call: { nr: number; arch: number; arg0?: number }): number {
  const data = Buffer.alloc(64);
  data.writeUInt32LE(call.nr >>> 0, 0);
  data.writeUInt32LE(call.arch >>> 0, 4);
  data.writeBigUInt64LE(BigInt(call.arg0 ?? 0), 16);
  let accumulator = 0;
  for (let pc = 0; pc < program.length / 8;) {
    const code = program.readUInt16LE(pc * 8);
    const jt = program.readUInt8(pc * 8 + 2);
    const jf = program.readUInt8(pc * 8 + 3);
    const k = program.readUInt32LE(pc * 8 + 4);
    pc++;
    switch (code) {
      case 0x20: // BPF_LD | BPF_W | BPF_ABS
        accumulator = data.readUInt32LE(k);
        break;
      case 0x15: // BPF_JMP | BPF_JEQ | BPF_K
        pc += accumulator === k ? jt : jf;
        break;
      case 0x35: // BPF_JMP | BPF_JGE | BPF_K
        pc += accumulator >= k ? jt : jf;
        break;
      case 0x45: // BPF_JMP | BPF_JSET | BPF_K
        pc += (accumulator & k) !== 0 ? jt : jf;
        break;
      case 0x06: // BPF_RET | BPF_K
        return k;
      default:
        throw new Error(`instruction ${code.toString(16)} is not one the filter uses`);
    }
  }
  throw new Error("the program ran off its end");
}

describe.each(Object.entries(SECCOMP_ARCHES))("the seccomp program for %s", (arch, table) => {
  const program = seccompProgram(arch) as Buffer;
  const call = (nr: number, arg0?: number) => run(program, { nr, arch: table.auditArch, ...(arg0 !== undefined ? { arg0 } : {}) });

  it("refuses every listed call with EPERM", () => {
    for (const [name, nr] of Object.entries(table.refused)) expect([name, call(nr)]).toEqual([name, errno(EPERM)]);
  });

  it("kills a process calling in another architecture's convention", () => {
    const other = Object.values(SECCOMP_ARCHES).find((each) => each !== table)!.auditArch;
    expect(run(program, { nr: table.socket, arch: other, arg0: AF_INET })).toBe(KILL_PROCESS);
    expect(run(program, { nr: 0, arch: 0x40000003 /* i386 */ })).toBe(KILL_PROCESS);
  });

  it("allows threads and Unix sockets, and what it does not list", () => {
    expect(call(table.clone, CLONE_THREAD | CLONE_VM)).toBe(ALLOW);
    expect(call(table.socket, AF_UNIX)).toBe(ALLOW);
    const listed = new Set([...Object.values(table.refused), table.clone, table.clone3, table.socket]);
    for (let nr = 0; nr < 460; nr++) if (!listed.has(nr)) expect([nr, call(nr)]).toEqual([nr, ALLOW]);
  });

  it("refuses a new process, a namespace and any socket but a Unix one; clone3 fails with ENOSYS", () => {
    expect(call(table.clone, SIGCHLD)).toBe(errno(EPERM));
    expect(call(table.clone, CLONE_THREAD | CLONE_NEWUSER)).toBe(errno(EPERM));
    for (let bit = 0; bit < 32; bit++) {
      const flag = 2 ** bit;
      if ((CLONE_NAMESPACE_FLAGS & flag) !== 0) expect(call(table.clone, CLONE_THREAD | flag)).toBe(errno(EPERM));
    }
    expect(call(table.socket, AF_INET)).toBe(errno(EPERM));
    expect(call(table.clone3)).toBe(errno(ENOSYS));
  });
});

describe("architectures", () => {
  it("x86_64: refuses x32 calls as a whole", () => {
    const x64 = SECCOMP_ARCHES["x64"]!;
    const program = seccompProgram("x64") as Buffer;
    expect(run(program, { nr: x64.x32Bit!, arch: x64.auditArch })).toBe(errno(EPERM));
    expect(run(program, { nr: x64.x32Bit! | x64.socket, arch: x64.auditArch, arg0: AF_UNIX })).toBe(errno(EPERM));
  });

  it("lists the same calls on each, but for fork, vfork and inotify_init, which aarch64 does not have", () => {
    const x64 = Object.keys(SECCOMP_ARCHES["x64"]!.refused).filter((name) => !["fork", "vfork", "inotify_init"].includes(name));
    expect(Object.keys(SECCOMP_ARCHES["arm64"]!.refused).sort()).toEqual(x64.sort());
  });

  it("has no program for an architecture whose numbers it does not hold", () => {
    expect(seccompProgram("riscv64")).toBeUndefined();
    expect(seccompProgram("ia32")).toBeUndefined();
  });
});
