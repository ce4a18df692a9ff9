/** Where a client keeps its state (specs, budget ledger, randomized reports; never a true value). */

/** A place for one JSON text, read and written whole. */
export interface StateStorage {
  load(): string | null;
  save(text: string): void;
  /** Keep a state the client could not read, for inspection, apart from the state it saves
   * next; where it was kept (a storage without this method cannot keep it). */
  setAside?(text: string): string;
}

/** State in memory only: lost when the page or process ends. */
export class MemoryStorage implements StateStorage {
  private text: string | null = null;
  /** The last state set aside as unreadable. */
  aside: string | null = null;
  load(): string | null { return this.text; }
  save(text: string): void { this.text = text; }
  setAside(text: string): string {
    this.aside = text;
    return "MemoryStorage.aside";
  }
}

/** State in a browser's localStorage under one key (an unreadable one kept under key + ".bad"). */
export class LocalStorage implements StateStorage {
  constructor(private readonly key = "deniable.state") {}
  load(): string | null { return globalThis.localStorage.getItem(this.key); }
  save(text: string): void { globalThis.localStorage.setItem(this.key, text); }
  setAside(text: string): string {
    globalThis.localStorage.setItem(`${this.key}.bad`, text);
    return `localStorage ${this.key}.bad`;
  }
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

const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value);
const isCount = (value: unknown): boolean => Number.isSafeInteger(value) && (value as number) >= 0;
const allOf = (value: unknown, check: (item: unknown) => boolean): boolean =>
  isRecord(value) && Object.values(value).every(check);

/** The fields a saved state may hold and what each must be (a missing one takes its default). */
const STATE_FIELDS: Record<string, (value: unknown) => boolean> = {
  specs: (v) => allOf(v, isRecord),
  etag: (v) => v === null || typeof v === "string",
  ledger: (v) => allOf(v, isCount),
  queue: (v) => Array.isArray(v) && v.every((item) => typeof item === "string"),
  secret: (v) => typeof v === "string",
  memo: (v) => allOf(v, (item) => item !== null && item !== undefined),
  totals: (v) => allOf(v, isCount),
  memoSizes: (v) => allOf(v, isCount),
};

/** Why the saved state `text` cannot be used as it is (null when it can): not JSON, another
 * version, or a field of the wrong shape, named (never its content). */
export function stateProblem(text: string): string | null {
  let state: unknown;
  try {
    state = JSON.parse(text);
  } catch {
    return "it is not JSON";
  }
  if (!isRecord(state)) return "it is not an object";
  if (state.version !== 1) return "it is not version 1";
  const bad = Object.entries(STATE_FIELDS)
    .filter(([name, check]) => name in state && !check(state[name]))
    .map(([name]) => name);
  return bad.length > 0 ? `${bad.join(", ")} ${bad.length > 1 ? "are" : "is"} malformed` : null;
}
