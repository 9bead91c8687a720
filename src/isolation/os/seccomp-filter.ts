/**
 * The seccomp filter loaded into every sandbox process by bubblewrap (`bwrap --seccomp FD`), as a
 * classic BPF program. It refuses, with EPERM, the system calls a sandbox process never needs and that
 * an attacker who escaped an isolate would reach for: tracing other processes, mounting, namespaces,
 * kernel modules and keyrings, eBPF, io_uring, `userfaultfd`, and every socket that is not a Unix one
 * (the IPC channel is one, inherited; tools reach the network only through the host's fetch).
 *
 * What it cannot refuse: `execve`. bwrap installs the filter just before it runs Node, so denying
 * `execve` would stop Node itself; instead the process sees only read-only system folders, no data
 * dir, no network and no capabilities, so whatever it could exec has nothing more to reach.
 *
 * Built for x86_64 only (the syscall numbers are per architecture); elsewhere `seccompProgram`
 * returns undefined and the host reports seccomp as off.
 */

const BPF_LD_W_ABS = 0x20;
const BPF_JEQ_K = 0x15;
const BPF_JGE_K = 0x35;
const BPF_RET_K = 0x06;
const SECCOMP_RET_ALLOW = 0x7fff0000;
const SECCOMP_RET_ERRNO = 0x00050000;
const SECCOMP_RET_KILL_PROCESS = 0x80000000;
const EPERM = 1;
const AUDIT_ARCH_X86_64 = 0xc000003e;
/** x32 system calls set this bit: refused as a whole. */
const X32_SYSCALL_BIT = 0x40000000;
const AF_UNIX = 1;
/** Offsets in `struct seccomp_data`. */
const OFFSET_NR = 0;
const OFFSET_ARCH = 4;
const OFFSET_ARG0_LOW = 16;

/** x86_64 numbers of the refused system calls. */
export const REFUSED_SYSCALLS_X86_64: Readonly<Record<string, number>> = {
  ptrace: 101,
  process_vm_readv: 310,
  process_vm_writev: 311,
  mount: 165,
  umount2: 166,
  pivot_root: 155,
  chroot: 161,
  swapon: 167,
  swapoff: 168,
  reboot: 169,
  sethostname: 170,
  setdomainname: 171,
  init_module: 175,
  delete_module: 176,
  finit_module: 313,
  kexec_load: 246,
  kexec_file_load: 320,
  acct: 163,
  settimeofday: 164,
  add_key: 248,
  request_key: 249,
  keyctl: 250,
  unshare: 272,
  setns: 308,
  bpf: 321,
  perf_event_open: 298,
  userfaultfd: 323,
  name_to_handle_at: 303,
  open_by_handle_at: 304,
  io_uring_setup: 425,
  io_uring_enter: 426,
  io_uring_register: 427,
  open_tree: 428,
  move_mount: 429,
  fsopen: 430,
  fsconfig: 431,
  fsmount: 432,
  fspick: 433,
  mount_setattr: 442,
};
const SOCKET_X86_64 = 41;

/** The filter as bytes (`struct sock_filter[]`), or undefined on an architecture it is not built for. */
export function seccompProgram(arch: string = process.arch): Buffer | undefined {
  if (arch !== "x64") return undefined;
  const refused = Object.values(REFUSED_SYSCALLS_X86_64);
  // Layout: arch check, x32 check, one test per refused call, the socket family test, ALLOW, DENY.
  const allowAt = 6 + refused.length + 2;
  const denyAt = allowAt + 1;
  const program: Array<[number, number, number, number]> = [];
  const jumpTo = (target: number) => target - (program.length + 1);
  program.push([BPF_LD_W_ABS, 0, 0, OFFSET_ARCH]);
  program.push([BPF_JEQ_K, 1, 0, AUDIT_ARCH_X86_64]);
  program.push([BPF_RET_K, 0, 0, SECCOMP_RET_KILL_PROCESS]);
  program.push([BPF_LD_W_ABS, 0, 0, OFFSET_NR]);
  program.push([BPF_JGE_K, jumpTo(denyAt), 0, X32_SYSCALL_BIT]);
  for (const nr of refused) program.push([BPF_JEQ_K, jumpTo(denyAt), 0, nr]);
  program.push([BPF_JEQ_K, 0, jumpTo(allowAt), SOCKET_X86_64]);
  program.push([BPF_LD_W_ABS, 0, 0, OFFSET_ARG0_LOW]);
  program.push([BPF_JEQ_K, jumpTo(allowAt), jumpTo(denyAt), AF_UNIX]);
  program.push([BPF_RET_K, 0, 0, SECCOMP_RET_ALLOW]);
  program.push([BPF_RET_K, 0, 0, SECCOMP_RET_ERRNO | EPERM]);
  if (program.length !== denyAt + 1) throw new Error("seccomp program layout is inconsistent");
  const bytes = Buffer.alloc(program.length * 8);
  program.forEach(([code, jt, jf, k], index) => {
    if (jt > 255 || jf > 255 || jt < 0 || jf < 0) throw new Error("seccomp jump out of range");
    bytes.writeUInt16LE(code, index * 8);
    bytes.writeUInt8(jt, index * 8 + 2);
    bytes.writeUInt8(jf, index * 8 + 3);
    bytes.writeUInt32LE(k >>> 0, index * 8 + 4);
  });
  return bytes;
}
