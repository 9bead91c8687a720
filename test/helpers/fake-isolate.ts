import { PooledIsolate } from "../../src/isolation/isolate/pooled-isolate.js";

/**
 * A pooled isolate over a stand-in for isolated-vm's isolate, for tests of the warm pool (which never
 * enters one): `bytes` is what the test's pool measures, `disposed` whether it was disposed.
 */
export class FakeIsolate extends PooledIsolate {
  constructor(
    key: string,
    public bytes: number,
  ) {
    const isolate = {
      isDisposed: false,
      dispose() {
        isolate.isDisposed = true;
      },
    };
    super(key, isolate as unknown as ConstructorParameters<typeof PooledIsolate>[1]);
  }

  get disposed(): boolean {
    return this.isolate.isDisposed;
  }
}
