/** Where a client keeps its state (specs, budget ledger, randomized reports; never a true value). */

/** A place for one JSON text, read and written whole. */
export interface StateStorage {
  load(): string | null;
  save(text: string): void;
}

/** State in memory only: lost when the page or process ends. */
export class MemoryStorage implements StateStorage {
  private text: string | null = null;
  load(): string | null { return this.text; }
  save(text: string): void { this.text = text; }
}

/** State in a browser's localStorage under one key. */
export class LocalStorage implements StateStorage {
  constructor(private readonly key = "deniable.state") {}
  load(): string | null { return globalThis.localStorage.getItem(this.key); }
  save(text: string): void { globalThis.localStorage.setItem(this.key, text); }
}

/** localStorage where the platform has it, else memory. */
export function defaultStorage(): StateStorage {
  try {
    if (typeof globalThis.localStorage !== "undefined" && globalThis.localStorage !== null) return new LocalStorage();
  } catch {
    // a sandboxed page may throw on touching localStorage
  }
  return new MemoryStorage();
}
