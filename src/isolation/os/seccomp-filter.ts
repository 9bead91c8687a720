/**
 * The seccomp filter loaded into every sandbox process by bubblewrap (`bwrap --seccomp FD`), as a
 * classic BPF program. It refuses, with EPERM, the system calls a sandbox process never needs and that
 * an attacker who escaped an isolate would reach for: tracing other processes, mounting, namespaces,
 * kernel modules and keyrings, eBPF, io_uring, `userfaultfd`, memory outside every resident set
 * (memfd, System V IPC), inotify and fanotify (kernel memory and a quota of the host's user), and
 * every socket that is not a Unix one (the IPC channel is one, inherited;
 * tools reach the network only through the host's fetch).
 *
 * Memory the host cannot measure: the watchdog (resource-watchdog.ts) counts what a process tree has
 * resident and what it wrote into its in-memory file systems, and nothing else. A `memfd_create` file
 * (and `memfd_secret`) holds memory for as long as a descriptor to it is open, mapped or not, and shows
 * in no resident set while unmapped; a System V shared memory segment lives on, unmapped, until its IPC
 * namespace ends; System V message queues and semaphore sets are kernel memory (the IPC namespace's
 * defaults allow ≈ 500 MB of messages and a billion semaphores). So all of System V IPC and both memfd
 * calls are refused, and `mq_open` with them (POSIX message queues: bounded by RLIMIT_MSGQUEUE, but no
 * sandbox process needs them). POSIX shared memory (`shm_open`) is a file in /dev/shm, which the launch
 * mounts read-only (os-sandbox.ts). Traced with the pinned Node (calls, descriptions, the startup
 * snapshot): a sandbox process makes none of these calls; Node's own `memfd_create` serves only native
 * addons loaded from a virtual file system, and V8's only its tests.
 *
 * Processes and namespaces: a sandbox process never starts another process, so `fork`, `vfork` and a
 * `clone` without CLONE_THREAD are refused, and so is a `clone` carrying any namespace flag (otherwise
 * `clone(CLONE_NEWUSER|…)` gave an attacker a child with every capability in fresh namespaces; `unshare`
 * and `setns` are refused above). Threads (`clone` with CLONE_THREAD, as pthread_create makes them for
 * Node, libuv and isolated-vm) stay allowed. `clone3` passes its flags in memory, which a classic filter
 * cannot read, so it fails with ENOSYS: glibc then falls back to `clone`, which the filter can check.
 * The kernel reads only the low 32 bits of `clone`'s flags, which is what the filter tests. Invariant
 * relied on by resource-watchdog.ts: a process under this filter has every child it will ever have.
 *
 * What it cannot refuse: `execve`. bwrap installs the filter just before it runs Node, so denying
 * `execve` would stop Node itself; instead the process sees only read-only system folders, no data
 * dir, no network and no capabilities, so whatever it could exec has nothing more to reach.
 *
 * Built for x86_64 and aarch64 (the syscall numbers are per architecture: `SECCOMP_ARCHES`); elsewhere
 * `seccompProgram` returns undefined and the host reports seccomp as off. The aarch64 program is checked
 * by running it in a BPF interpreter (test/isolation/os/seccomp-filter.test.ts), the x86_64 one also in
 * the kernel of the machine the tests run on (test/security/os-sandbox.test.ts).
 */

const BPF_LD_W_ABS = 0x20;
const BPF_JEQ_K = 0x15;
const BPF_JGE_K = 0x35;
/** Jump if (A & k) != 0. */
const BPF_JSET_K = 0x45;
const BPF_RET_K = 0x06;
const SECCOMP_RET_ALLOW = 0x7fff0000;
const SECCOMP_RET_ERRNO = 0x00050000;
const SECCOMP_RET_KILL_PROCESS = 0x80000000;
const EPERM = 1;
const ENOSYS = 38;
const AF_UNIX = 1;
/** Offsets in `struct seccomp_data`. */
const OFFSET_NR = 0;
const OFFSET_ARCH = 4;
const OFFSET_ARG0_LOW = 16;

/**
 * Refused calls added since Linux 5.1, whose numbers are the same on every architecture (424 on: the
 * kernel numbers new calls once for all).
 */
const UNIFIED_NUMBERS = {
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
  memfd_secret: 447,
} as const;

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
  ...UNIFIED_NUMBERS,
  // New processes: a sandbox process runs threads only (clone is checked below).
  fork: 57,
  vfork: 58,
  // Memory no process's resident set shows (see the header): anonymous files and System V and POSIX
  // message-queue IPC. Node, V8 and isolated-vm call none of them in a sandbox process (traced).
  memfd_create: 319,
  shmget: 29,
  shmat: 30,
  shmctl: 31,
  shmdt: 67,
  semget: 64,
  semop: 65,
  semctl: 66,
  semtimedop: 220,
  msgget: 68,
  msgsnd: 69,
  msgrcv: 70,
  msgctl: 71,
  mq_open: 240,
  // Kernel memory charged to the host's user: each inotify watch pins an inode (≈ 1.1 KB, no resident
  // set shows it) and counts against the user's fs.inotify.max_user_watches, which the host's own
  // tool-folder watcher needs (60,000 watches from one process: +67 MB of slab). A sandbox process
  // watches nothing; fanotify with them.
  inotify_init: 253,
  inotify_init1: 294,
  inotify_add_watch: 254,
  fanotify_init: 300,
  // Scheduling: the host lowers a noisy cordon's process from outside (SCHED_IDLE and the upper half of
  // the CPUs, rescheduler.ts); native code in the process could widen its own CPU set back. Node, V8 and
  // isolated-vm set neither in a sandbox process (nice is set with setpriority, which the kernel only
  // lets it raise).
  sched_setaffinity: 203,
  sched_setscheduler: 144,
  sched_setattr: 314,
};

/**
 * aarch64 numbers of the same calls (the kernel's generic table, include/uapi/asm-generic/unistd.h),
 * name for name: aarch64 has no `fork` or `vfork` (only `clone`, checked below) and no `inotify_init`.
 */
export const REFUSED_SYSCALLS_AARCH64: Readonly<Record<string, number>> = {
  ptrace: 117,
  process_vm_readv: 270,
  process_vm_writev: 271,
  mount: 40,
  umount2: 39,
  pivot_root: 41,
  chroot: 51,
  swapon: 224,
  swapoff: 225,
  reboot: 142,
  sethostname: 161,
  setdomainname: 162,
  init_module: 105,
  delete_module: 106,
  finit_module: 273,
  kexec_load: 104,
  kexec_file_load: 294,
  acct: 89,
  settimeofday: 170,
  add_key: 217,
  request_key: 218,
  keyctl: 219,
  unshare: 97,
  setns: 268,
  bpf: 280,
  perf_event_open: 241,
  userfaultfd: 282,
  name_to_handle_at: 264,
  open_by_handle_at: 265,
  ...UNIFIED_NUMBERS,
  memfd_create: 279,
  shmget: 194,
  shmat: 196,
  shmctl: 195,
  shmdt: 197,
  semget: 190,
  semop: 193,
  semctl: 191,
  semtimedop: 192,
  msgget: 186,
  msgsnd: 189,
  msgrcv: 188,
  msgctl: 187,
  mq_open: 180,
  // aarch64 has no inotify_init (only inotify_init1).
  inotify_init1: 26,
  inotify_add_watch: 27,
  fanotify_init: 262,
  sched_setaffinity: 122,
  sched_setscheduler: 119,
  sched_setattr: 274,
};

/** What the filter needs of an architecture it is built for (keyed by Node's `process.arch`). */
export interface SeccompArch {
  /** `AUDIT_ARCH_*`: the filter kills a process whose system call comes in any other convention. */
  auditArch: number;
  refused: Readonly<Record<string, number>>;
  socket: number;
  clone: number;
  /** Answered with ENOSYS, not EPERM, so that glibc (pthread_create, posix_spawn) falls back to `clone`. */
  clone3: number;
  /** x86_64's x32 calls set a bit of the number: refused as a whole. */
  x32Bit?: number;
}

export const SECCOMP_ARCHES: Readonly<Record<string, SeccompArch>> = {
  x64: { auditArch: 0xc000003e, refused: REFUSED_SYSCALLS_X86_64, socket: 41, clone: 56, clone3: 435, x32Bit: 0x40000000 },
  arm64: { auditArch: 0xc00000b7, refused: REFUSED_SYSCALLS_AARCH64, socket: 198, clone: 220, clone3: 435 },
};

/** `clone` flags (arg0, low 32 bits) that make a new namespace: any of them is refused. */
export const CLONE_NAMESPACE_FLAGS =
  0x00020000 | // CLONE_NEWNS
  0x02000000 | // CLONE_NEWCGROUP
  0x04000000 | // CLONE_NEWUTS
  0x08000000 | // CLONE_NEWIPC
  0x10000000 | // CLONE_NEWUSER
  0x20000000 | // CLONE_NEWPID
  0x40000000 | // CLONE_NEWNET
  0x00000080; // CLONE_NEWTIME: in `clone`'s exit-signal byte, where no valid signal sets it (clone3/unshare only)
/** A `clone` without it makes a new process (fork-like), refused; with it, a thread of this process. */
export const CLONE_THREAD = 0x00010000;

/**
 * The filter as bytes (`struct sock_filter[]`), or undefined on an architecture it is not built for.
 *
 * Layout (jumps are forward only, to the three returns at the end):
 *   arch check (KILL unless the built one), load nr, [x86_64: x32 bit → DENY],
 *   one test per refused call → DENY, clone3 → ENOSYS, clone → CLONE, socket → SOCKET, else → ALLOW;
 *   SOCKET: load arg0, AF_UNIX → ALLOW, else → DENY;
 *   CLONE:  load arg0, any namespace flag → DENY, CLONE_THREAD → ALLOW, else → DENY;
 *   ENOSYS, ALLOW, DENY (EPERM).
 * Invariant: DENY is the last instruction and ALLOW the one before it (checked below).
 */
export function seccompProgram(arch: string = process.arch): Buffer | undefined {
  const table = SECCOMP_ARCHES[arch];
  if (!table) return undefined;
  const refused = Object.values(table.refused);
  const head = table.x32Bit === undefined ? 4 : 5;
  const socketAt = head + refused.length + 3;
  const cloneAt = socketAt + 2;
  const enosysAt = cloneAt + 3;
  const allowAt = enosysAt + 1;
  const denyAt = allowAt + 1;
  const program: Array<[number, number, number, number]> = [];
  const jumpTo = (target: number) => target - (program.length + 1);
  program.push([BPF_LD_W_ABS, 0, 0, OFFSET_ARCH]);
  program.push([BPF_JEQ_K, 1, 0, table.auditArch]);
  program.push([BPF_RET_K, 0, 0, SECCOMP_RET_KILL_PROCESS]);
  program.push([BPF_LD_W_ABS, 0, 0, OFFSET_NR]);
  if (table.x32Bit !== undefined) program.push([BPF_JGE_K, jumpTo(denyAt), 0, table.x32Bit]);
  for (const nr of refused) program.push([BPF_JEQ_K, jumpTo(denyAt), 0, nr]);
  program.push([BPF_JEQ_K, jumpTo(enosysAt), 0, table.clone3]);
  program.push([BPF_JEQ_K, jumpTo(cloneAt), 0, table.clone]);
  program.push([BPF_JEQ_K, 0, jumpTo(allowAt), table.socket]);
  if (program.length !== socketAt) throw new Error("seccomp program layout is inconsistent (socket test)");
  program.push([BPF_LD_W_ABS, 0, 0, OFFSET_ARG0_LOW]);
  program.push([BPF_JEQ_K, jumpTo(allowAt), jumpTo(denyAt), AF_UNIX]);
  if (program.length !== cloneAt) throw new Error("seccomp program layout is inconsistent (clone test)");
  program.push([BPF_LD_W_ABS, 0, 0, OFFSET_ARG0_LOW]);
  program.push([BPF_JSET_K, jumpTo(denyAt), 0, CLONE_NAMESPACE_FLAGS]);
  program.push([BPF_JSET_K, jumpTo(allowAt), jumpTo(denyAt), CLONE_THREAD]);
  if (program.length !== enosysAt) throw new Error("seccomp program layout is inconsistent (returns)");
  program.push([BPF_RET_K, 0, 0, SECCOMP_RET_ERRNO | ENOSYS]);
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
